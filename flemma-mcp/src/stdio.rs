//! A stdio server's transport: its process, and the lines of its stdout decoded as JSON-RPC
//! messages, bounded, with every message that cannot be decoded answering the request it
//! was for at once.
//!
//! rmcp's child-process transport drops a line it cannot decode (over its size limit, not
//! UTF-8, not JSON) and keeps reading, so the call that line answered waits for its
//! `tool_timeout`. This one hands rmcp an error answer for that request instead, naming the
//! cause, and tells the server's [`Listener`] which request it was, so the call's result
//! says what happened.

use std::collections::{HashSet, VecDeque};
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rmcp::model::{
    ClientNotification, ErrorCode, ErrorData, JsonRpcError, JsonRpcMessage, RequestId,
};
use rmcp::service::{RoleClient, RxJsonRpcMessage, TxJsonRpcMessage};
use tokio::io::AsyncWriteExt;
use tokio::process::{Child, ChildStdin, ChildStdout};

use crate::connect::Listener;
use crate::lines::{BoundedLines, Line};
use crate::undecodable::{DecodeError, answer_id, head_id, tail_id};

/// The longest message a server may send: 16 MiB, as rmcp's stdio and HTTP transports.
pub(crate) const MAX_MESSAGE: usize = 16 * 1024 * 1024;

/// How long closing waits for the process to exit once its stdin is closed, before it is
/// killed.
const EXIT_WAIT: Duration = Duration::from_secs(3);

/// How much of the start of a message is read for its `id`.
const HEAD: usize = 4096;

/// The UTF-8 byte order mark (RFC 8259 §8.1 lets a parser ignore it).
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// The requests sent and not yet answered.
type Pending = Arc<Mutex<HashSet<RequestId>>>;

/// The transport of one stdio server.
pub(crate) struct StdioTransport {
    server: String,
    /// The process; killed when the transport is dropped without closing.
    child: Option<Child>,
    stdout: BoundedLines<ChildStdout>,
    stdin: Arc<tokio::sync::Mutex<Option<ChildStdin>>>,
    pending: Pending,
    /// Error answers made for requests whose answer could not be decoded, to hand out.
    answers: VecDeque<RxJsonRpcMessage<RoleClient>>,
    listener: Arc<dyn Listener>,
}

/// Why writing to the server failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum SendError {
    /// The transport was closed.
    #[error("the server's stdin is closed")]
    Closed,
    /// The message could not be encoded.
    #[error("the message could not be encoded")]
    Encode(#[source] serde_json::Error),
    /// Writing failed.
    #[error("writing to the server's stdin failed")]
    Write(#[source] std::io::Error),
}

impl StdioTransport {
    /// Starts `command` (its stdin, stdout and stderr piped); returns the transport and the
    /// process's stderr.
    pub(crate) fn spawn(
        server: &str,
        mut command: tokio::process::Command,
        listener: Arc<dyn Listener>,
    ) -> std::io::Result<(Self, Option<tokio::process::ChildStderr>)> {
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = command.spawn()?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(std::io::Error::other("the process's stdio was not piped"));
        };
        let stderr = child.stderr.take();
        let transport = Self {
            server: server.to_owned(),
            child: Some(child),
            stdout: BoundedLines::new(stdout, MAX_MESSAGE),
            stdin: Arc::new(tokio::sync::Mutex::new(Some(stdin))),
            pending: Pending::default(),
            answers: VecDeque::new(),
            listener,
        };
        Ok((transport, stderr))
    }

    /// The process id.
    pub(crate) fn id(&self) -> Option<u32> {
        self.child.as_ref().and_then(Child::id)
    }

    fn pending(&self) -> std::sync::MutexGuard<'_, HashSet<RequestId>> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Decodes one line; `None` for a line that is no message for rmcp (empty, a
    /// notification flemma cannot read, an answer to no pending request).
    async fn decode(&mut self, line: Line) -> Option<RxJsonRpcMessage<RoleClient>> {
        if !line.ended {
            // The end of the stream in the middle of a message: the server exited while
            // writing it, and the connection is closed (what the calls then answer).
            return None;
        }
        if line.is_cut() {
            let cause = DecodeError::TooLarge {
                limit: MAX_MESSAGE,
                size: line.bytes.len() + line.dropped,
            };
            let id =
                head_id(&line.bytes[..line.bytes.len().min(HEAD)]).or_else(|| tail_id(&line.end()));
            return self.undecodable(&cause, id);
        }
        let bytes = line.bytes.strip_prefix(BOM).unwrap_or(&line.bytes);
        let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return None;
        }
        match serde_json::from_slice::<RxJsonRpcMessage<RoleClient>>(bytes) {
            Ok(message) => {
                if let JsonRpcMessage::Response(r) = &message {
                    self.pending().remove(&r.id);
                } else if let JsonRpcMessage::Error(JsonRpcError { id: Some(id), .. }) = &message {
                    self.pending().remove(id);
                }
                Some(message)
            }
            Err(error) => {
                let (cause, value) = match std::str::from_utf8(bytes) {
                    Err(utf8) => (
                        DecodeError::InvalidUtf8(utf8),
                        serde_json::from_str::<serde_json::Value>(&String::from_utf8_lossy(bytes))
                            .ok(),
                    ),
                    Ok(text) => match serde_json::from_str::<serde_json::Value>(text) {
                        Ok(value) => (DecodeError::NotJsonRpc(Arc::new(error)), Some(value)),
                        Err(_) => (DecodeError::InvalidJson(Arc::new(error)), None),
                    },
                };
                if let Some(value) = &value
                    && let Some(method) = value.get("method").and_then(serde_json::Value::as_str)
                {
                    // A notification or a request of the server flemma cannot read: not an
                    // answer to anything flemma waits for.
                    tracing::debug!(
                        server = %self.server,
                        method = %flemma_ids::visible::line(method),
                        error = %flemma_ids::error_chain(&cause),
                        "MCP server message ignored"
                    );
                    if let Some(id) = value
                        .get("id")
                        .and_then(|id| serde_json::from_value::<RequestId>(id.clone()).ok())
                    {
                        self.refuse(id).await;
                    }
                    return None;
                }
                let id = match &value {
                    Some(value) => answer_id(value),
                    None => head_id(&bytes[..bytes.len().min(HEAD)]).or_else(|| tail_id(bytes)),
                };
                self.undecodable(&cause, id)
            }
        }
    }

    /// Answers a server's request flemma cannot read with `Invalid Request`.
    async fn refuse(&self, id: RequestId) {
        let answer: TxJsonRpcMessage<RoleClient> = JsonRpcMessage::Error(JsonRpcError::new(
            Some(id),
            ErrorData::invalid_request("Invalid request", None),
        ));
        let _ = write(&self.stdin, &answer).await;
    }

    /// A message that could not be decoded, for the request `id` when it was read from it:
    /// that request, or (when no pending request is known to be the one) every pending
    /// request, gets an error answer naming `cause`.
    fn undecodable(
        &mut self,
        cause: &DecodeError,
        id: Option<RequestId>,
    ) -> Option<RxJsonRpcMessage<RoleClient>> {
        let failed: Vec<RequestId> = {
            let mut pending = self.pending();
            match id {
                Some(id) => pending.take(&id).into_iter().collect(),
                None => pending.drain().collect(),
            }
        };
        if failed.is_empty() {
            tracing::warn!(
                server = %self.server,
                error = %flemma_ids::error_chain(cause),
                "MCP server sent a message that could not be decoded, for no pending request"
            );
            return None;
        }
        let message = format!("flemma could not decode the answer: {cause}");
        for id in failed {
            self.listener.undecodable(id.clone(), cause.clone());
            self.answers
                .push_back(JsonRpcMessage::Error(JsonRpcError::new(
                    Some(id),
                    ErrorData::new(ErrorCode::PARSE_ERROR, message.clone(), None),
                )));
        }
        self.answers.pop_front()
    }

    /// Closes stdin, waits for the process to exit, kills it if it does not.
    async fn shut_down(&mut self) -> std::io::Result<()> {
        drop(self.stdin.lock().await.take());
        let Some(child) = self.child.as_mut() else {
            return Ok(());
        };
        if tokio::time::timeout(EXIT_WAIT, child.wait()).await.is_err() {
            child.kill().await?;
        }
        self.child = None;
        Ok(())
    }
}

impl Drop for StdioTransport {
    fn drop(&mut self) {
        // Killed and reaped (`kill_on_drop` kills; waiting reaps, so no zombie remains).
        if let Some(mut child) = self.child.take()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            let _ = child.start_kill();
            runtime.spawn(async move {
                let _ = child.wait().await;
            });
        }
    }
}

async fn write(
    stdin: &tokio::sync::Mutex<Option<ChildStdin>>,
    message: &TxJsonRpcMessage<RoleClient>,
) -> Result<(), SendError> {
    let mut line = serde_json::to_vec(message).map_err(SendError::Encode)?;
    line.push(b'\n');
    let mut stdin = stdin.lock().await;
    let stdin = stdin.as_mut().ok_or(SendError::Closed)?;
    stdin.write_all(&line).await.map_err(SendError::Write)?;
    stdin.flush().await.map_err(SendError::Write)
}

impl rmcp::transport::Transport<RoleClient> for StdioTransport {
    type Error = SendError;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), SendError>> + Send + 'static {
        match &item {
            JsonRpcMessage::Request(request) => {
                self.pending().insert(request.id.clone());
            }
            JsonRpcMessage::Notification(notification) => {
                if let ClientNotification::CancelledNotification(cancelled) =
                    &notification.notification
                    && let Some(id) = &cancelled.params.request_id
                {
                    // No answer is waited for any more.
                    self.pending().remove(id);
                }
            }
            _ => {}
        }
        let stdin = Arc::clone(&self.stdin);
        async move { write(&stdin, &item).await }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            if let Some(answer) = self.answers.pop_front() {
                return Some(answer);
            }
            let line = match self.stdout.next_line().await {
                Ok(Some(line)) => line,
                Ok(None) => return None,
                Err(error) => {
                    tracing::debug!(server = %self.server, %error, "MCP server stdout closed");
                    return None;
                }
            };
            if let Some(message) = self.decode(line).await {
                return Some(message);
            }
        }
    }

    async fn close(&mut self) -> Result<(), SendError> {
        self.shut_down().await.map_err(SendError::Write)
    }
}

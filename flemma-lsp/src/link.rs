//! The server's side of a connection: messages in, messages and encoded results out. A
//! request's result is encoded once, straight to JSON text (`serde_json::to_string`), rather
//! than built as a `serde_json::Value` first: for an outline of a 10 MB transcript that is 5 ms
//! instead of 60.

use std::io::Write as _;

use crossbeam_channel::{Receiver, Sender};
use lsp_server::{Connection, ErrorCode, Message, Notification, RequestId, Response};
use lsp_types::notification::Notification as _;

use crate::LspError;

/// What the server sends.
pub(crate) enum Outgoing {
    Message(Message),
    /// A successful response whose result is already JSON text.
    Result {
        id: RequestId,
        json: String,
    },
}

/// The server's ends of a connection.
pub(crate) struct Link {
    pub(crate) receiver: Receiver<Message>,
    sender: Sender<Outgoing>,
}

impl Link {
    /// Sends a message.
    pub(crate) fn send(&self, message: Message) -> Result<(), LspError> {
        self.sender
            .send(Outgoing::Message(message))
            .map_err(|_| LspError::Send)
    }

    /// Answers the request `id` with an error.
    pub(crate) fn error(
        &self,
        id: RequestId,
        code: lsp_server::ErrorCode,
        text: impl Into<String>,
    ) -> Result<(), LspError> {
        self.send(Message::Response(Response::new_err(
            id,
            code as i32,
            text.into(),
        )))
    }

    /// Answers the request `id` with `result`.
    pub(crate) fn result<R: serde::Serialize>(
        &self,
        id: RequestId,
        result: &R,
    ) -> Result<(), LspError> {
        let json = serde_json::to_string(result).map_err(LspError::Json)?;
        self.sender
            .send(Outgoing::Result { id, json })
            .map_err(|_| LspError::Send)
    }
}

/// Runs `serve` on an in-memory [`Connection`] (a test's, a host's): results are turned into
/// the connection's messages by a thread of their own.
pub(crate) fn over_connection<T>(connection: &Connection, serve: impl FnOnce(Link) -> T) -> T {
    let (sender, outgoing) = crossbeam_channel::unbounded::<Outgoing>();
    let to_client = connection.sender.clone();
    std::thread::scope(|scope| {
        scope.spawn(move || {
            for out in outgoing {
                let message = match out {
                    Outgoing::Message(message) => message,
                    Outgoing::Result { id, json } => Message::Response(Response {
                        id,
                        result: Some(serde_json::from_str(&json).unwrap_or_default()),
                        error: None,
                    }),
                };
                if to_client.send(message).is_err() {
                    break;
                }
            }
        });
        serve(Link {
            receiver: connection.receiver.clone(),
            sender,
        })
    })
}

/// Runs `serve` on a byte stream in the protocol's framing (`Content-Length` headers):
/// messages read from `input`, written to `output`, each on a thread of its own.
pub(crate) fn over_io<R, W>(
    input: R,
    output: W,
    serve: impl FnOnce(Link) -> Result<(), LspError>,
) -> Result<(), LspError>
where
    R: std::io::Read + Send + 'static,
    W: std::io::Write + Send + 'static,
{
    let (to_server, receiver) = crossbeam_channel::bounded::<Message>(0);
    let (sender, outgoing) = crossbeam_channel::unbounded::<Outgoing>();
    // The reader's answers to the frames it refuses: a channel of their own, so that a
    // reader still waiting for input does not keep the writer going once the server is done.
    let (refusals, refused) = crossbeam_channel::unbounded::<Outgoing>();
    let reader = std::thread::spawn(move || -> std::io::Result<()> {
        let mut input = std::io::BufReader::new(input);
        let mut complain = |id: Option<RequestId>, refusal: crate::frame::Refusal| {
            let _ = refusals.send(Outgoing::Message(refusal_message(id, &refusal)));
        };
        while let Some(message) = crate::frame::read(&mut input, &mut complain)? {
            let exit = matches!(&message, Message::Notification(n) if n.method == "exit");
            if to_server.send(message).is_err() || exit {
                break;
            }
        }
        Ok(())
    });
    let writer = std::thread::spawn(move || -> std::io::Result<()> {
        let mut stdout = std::io::BufWriter::new(output);
        let mut refused = Some(refused);
        loop {
            let never = crossbeam_channel::never();
            let out = crossbeam_channel::select! {
                recv(outgoing) -> out => {
                    let Ok(out) = out else {
                        // The server is done: what the reader refused before it ended is
                        // still answered (select picks among ready channels at random).
                        for out in refused.iter().flat_map(crossbeam_channel::Receiver::try_iter) {
                            if let Outgoing::Message(message) = out {
                                message.write(&mut stdout)?;
                            }
                        }
                        stdout.flush()?;
                        break;
                    };
                    out
                }
                recv(refused.as_ref().unwrap_or(&never)) -> out => {
                    let Ok(out) = out else {
                        refused = None;
                        continue;
                    };
                    out
                }
            };
            match out {
                Outgoing::Message(message) => {
                    message.write(&mut stdout)?;
                    stdout.flush()?;
                }
                Outgoing::Result { id, json } => {
                    let head = format!(
                        "{{\"jsonrpc\":\"2.0\",\"id\":{},\"result\":",
                        serde_json::to_string(&id)?
                    );
                    let length = head.len() + json.len() + 1;
                    write!(stdout, "Content-Length: {length}\r\n\r\n{head}")?;
                    stdout.write_all(json.as_bytes())?;
                    stdout.write_all(b"}")?;
                    stdout.flush()?;
                }
            }
        }
        Ok(())
    });
    let served = serve(Link { receiver, sender });
    // The link is dropped: the writer ends once it has written everything.
    let written = writer
        .join()
        .unwrap_or_else(|_| Err(std::io::Error::other("the writer thread panicked")))
        .map_err(LspError::Io);
    // The reader ends at `exit` or the end of standard input; when the server stopped for
    // another reason it may still wait for input, and the process's end stops it.
    if reader.is_finished() {
        reader
            .join()
            .unwrap_or_else(|_| Err(std::io::Error::other("the reader thread panicked")))
            .map_err(LspError::Io)?;
    }
    served.and(written)
}

/// What the server says of a frame it refused: the request's error when it has an id (the
/// protocol's `InvalidRequest`), a warning in the client's log otherwise.
fn refusal_message(id: Option<RequestId>, refusal: &crate::frame::Refusal) -> Message {
    let text = format!(
        "flemma-lsp: frame refused: {}",
        crate::error::report(refusal)
    );
    match id {
        Some(id) => Message::Response(Response::new_err(
            id,
            ErrorCode::InvalidRequest as i32,
            text,
        )),
        None => Message::Notification(Notification::new(
            lsp_types::notification::LogMessage::METHOD.to_owned(),
            lsp_types::LogMessageParams {
                typ: lsp_types::MessageType::WARNING,
                message: text,
            },
        )),
    }
}

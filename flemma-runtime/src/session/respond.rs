//! Phase 3: build the request from the conversation, stream the response into it.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use crate::Durability;
use crate::transcript::TranscriptError;
use flemma_ast::TextEdit;
use flemma_ast::{Role, Segment};
use flemma_config::AutopilotOptions;
use flemma_ids::Severity;
use flemma_ids::{ToolName, ToolUseId};
use flemma_providers::{
    FileAccess, OnRetry, PromptBuilder, Provider, Request, ResponseWriter, Retry, StopReason,
    StreamEvent,
};
use flemma_schema::Capability;
use futures_util::StreamExt as _;

use super::{Control, Session, SessionError, SessionEvent};

/// Appends `n` in decimal (what `write!(out, "{n}")` writes, without the formatter).
fn push_decimal(out: &mut String, n: u32) {
    let mut digits = [0u8; 10];
    let mut at = digits.len();
    let mut rest = n;
    loop {
        at -= 1;
        digits[at] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    out.extend(digits[at..].iter().map(|&d| char::from(d)));
}

/// The abort marker's line (the `request.aborted` text).
const ABORT_MARKER: &str = "<!-- flemma:aborted: Response interrupted by the user. -->";
/// How the message of the abort marker under a response the stream cut begins (the marker is
/// the Flemma plugin's; its message says why the response is incomplete).
pub(crate) const INCOMPLETE: &str = "Response incomplete";

/// How a response ended.
pub(super) enum Response {
    /// The user cancelled it.
    Cancelled,
    /// It completed.
    Complete {
        /// The tool calls it asked for.
        tool_uses: usize,
        /// The autopilot options of the conversation when it was sent.
        autopilot: AutopilotOptions,
    },
}

/// Marks the request in flight while it lives.
struct InFlight<'a>(&'a Control);

impl<'a> InFlight<'a> {
    fn new(control: &'a Control) -> Self {
        control.in_flight.store(true, Ordering::SeqCst);
        Self(control)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.store(false, Ordering::SeqCst);
    }
}

/// The response being written: the writer, the text not yet written, and what was.
struct Output {
    writer: ResponseWriter,
    pending: String,
    flushed: bool,
    last_flush: Instant,
    tool_uses: usize,
    /// The usage the provider reported last (each report replaces the one before).
    usage: Option<flemma_providers::Usage>,
    /// What the response said, gathered for its span (`telemetry.capture_content`).
    reply: Option<crate::telemetry::content::Reply>,
}

/// A request ready to send, with what the response's accounting needs.
struct Prepared {
    request: Request,
    autopilot: AutopilotOptions,
    /// The model the request names.
    model: String,
    /// The request's `max_tokens`, when set.
    max_tokens: Option<u64>,
    /// The store directory of a conversation with a file, where its usage log is.
    store: Option<std::path::PathBuf>,
    /// What the request sends, for its span, when `telemetry.capture_content`.
    captured: Option<crate::telemetry::content::Input>,
}

/// What requests are built with (see [`Session::building`]).
pub(super) struct Building {
    /// The prompt builder under the conversation's options.
    pub(super) builder: PromptBuilder,
    /// The request options, the offered tools included.
    pub(super) request_options: std::sync::Arc<flemma_providers::RequestOptions>,
    /// The autopilot options of the conversation.
    pub(super) autopilot: AutopilotOptions,
    /// The store directory of a conversation with a file, where its usage log is.
    pub(super) log_store: Option<std::path::PathBuf>,
    /// `telemetry.capture_content`: the spans record the messages.
    pub(super) capture: bool,
}

/// How a response ends: what is known once its stream is over.
struct Ending {
    provider: String,
    /// A blank line was written before the header (removed with it).
    separator: bool,
    /// Some of the response reached the conversation (or is waiting to).
    arrived: bool,
}

impl Session {
    /// Sends the conversation and streams the response into it.
    pub(super) async fn respond(
        &self,
        provider: &dyn Provider,
        control: &Control,
        turn: u64,
    ) -> Result<Response, SessionError> {
        let _in_flight = InFlight::new(control);
        let prepared = self.prepare(provider).await?;
        let span = crate::telemetry::chat(
            self.inner.transcript().conversation_id(),
            provider.name(),
            &prepared.model,
            prepared.max_tokens,
            turn,
            false,
        );
        if let Some(input) = &prepared.captured {
            input.record(&span);
        }
        let responded = tracing::Instrument::instrument(
            self.respond_prepared(provider, control, turn, prepared),
            span.clone(),
        )
        .await;
        if let Err(error) = &responded {
            crate::telemetry::record_error(&span, error.kind());
        }
        responded
    }

    /// [`respond`](Self::respond) once the request is built.
    async fn respond_prepared(
        &self,
        provider: &dyn Provider,
        control: &Control,
        turn: u64,
        prepared: Prepared,
    ) -> Result<Response, SessionError> {
        let name = provider.name().to_owned();
        let Prepared {
            request,
            autopilot,
            model,
            store,
            captured,
            ..
        } = prepared;
        self.emit(SessionEvent::RequestSending { turn });
        let separator = self.write_header().await?;
        let Some(mut stream) = self
            .open_stream(provider, control, request, separator)
            .await?
        else {
            return Ok(Response::Cancelled);
        };
        let mut out = Output {
            writer: ResponseWriter::new(),
            pending: String::new(),
            flushed: false,
            last_flush: Instant::now(),
            tool_uses: 0,
            usage: None,
            reply: captured.map(|_| crate::telemetry::content::Reply::default()),
        };
        let streamed = self.stream_into(&mut stream, control, &mut out).await;
        drop(stream);
        // What the provider counted is accounted for however the response ended.
        if let Some(usage) = out.usage.take() {
            self.account(turn, &name, &model, store.as_deref(), usage, false);
        }
        let cancelled = streamed?;
        let tail = out.writer.finish();
        out.pending.push_str(&tail);
        if let Some(reply) = out.reply.take() {
            // What arrived, however the response ended (`error` when it did not).
            reply.record(&tracing::Span::current(), out.writer.stop());
        }
        let ending = Ending {
            provider: name,
            separator,
            arrived: out.flushed || !out.pending.trim().is_empty(),
        };
        if cancelled {
            self.end_cut(&mut out, &ending, &format!("\n{ABORT_MARKER}"))
                .await?;
            self.emit(SessionEvent::RequestAborted);
            return Ok(Response::Cancelled);
        }
        if let Some(message) = out.writer.error().map(str::to_owned) {
            // What arrived stays, marked incomplete: the next run sends the request again
            // (see `drop_incomplete_response`).
            self.end_cut(
                &mut out,
                &ending,
                &format!("\n{}", incomplete_marker(&message)),
            )
            .await?;
            return Err(SessionError::Stream {
                provider: ending.provider,
                message,
            });
        }
        self.end_complete(&mut out, &ending).await?;
        crate::telemetry::record_finish(&tracing::Span::current(), out.writer.stop());
        self.emit(SessionEvent::TurnFinished {
            turn,
            stop: out.writer.stop().cloned(),
            tool_uses: out.tool_uses,
        });
        Ok(Response::Complete {
            tool_uses: out.tool_uses,
            autopilot,
        })
    }

    /// Sends the request; `None` when the user cancelled before the stream started (the
    /// header is removed then, and `RequestAborted` emitted).
    async fn open_stream(
        &self,
        provider: &dyn Provider,
        control: &Control,
        request: Request,
        separator: bool,
    ) -> Result<Option<flemma_providers::EventStream>, SessionError> {
        let inner = std::sync::Arc::clone(&self.inner);
        let on_retry: OnRetry = std::sync::Arc::new(move |retry: &Retry| {
            inner
                .subscribers
                .emit(SessionEvent::Retrying(retry.clone()));
        });
        let started = tokio::select! {
            biased;
            () = control.token.cancelled() => None,
            stream = provider.stream_observed(request, on_retry) => Some(stream),
        };
        match started {
            None => {
                self.remove_header(separator).await?;
                self.emit(SessionEvent::RequestAborted);
                Ok(None)
            }
            Some(Err(source)) => {
                self.remove_header(separator).await?;
                Err(SessionError::Send {
                    provider: provider.name().to_owned(),
                    source,
                })
            }
            Some(Ok(stream)) => Ok(Some(stream)),
        }
    }

    /// Ends a response cut short (cancelled, or a stream error): what arrived stays, followed
    /// by `marker`, and is made durable; nothing arrived: the header goes.
    async fn end_cut(
        &self,
        out: &mut Output,
        ending: &Ending,
        marker: &str,
    ) -> Result<(), SessionError> {
        if ending.arrived {
            self.flush(out, true).await?;
            self.append(marker).await?;
            self.inner.executor.conversation().sync().await?;
        } else {
            self.remove_header(ending.separator).await?;
        }
        Ok(())
    }

    /// Ends a complete response: its warnings shown, the user's `@You:` when it asked for no
    /// tool, and the response made durable before the user answers. A response with calls is
    /// made durable by the cycle that follows it, before any call starts (its first durable
    /// change, or its sync), or by [`Session::send`](super::Session) when no cycle follows.
    async fn end_complete(&self, out: &mut Output, ending: &Ending) -> Result<(), SessionError> {
        let provider = &ending.provider;
        for warning in out.writer.warnings() {
            self.emit(SessionEvent::Warning(warning.clone()));
        }
        if out.writer.stop() == Some(&StopReason::MaxTokens) && out.writer.warnings().is_empty() {
            // Spec 13.2: a response cut by `max_tokens` is a truncation warning for the user.
            self.emit(SessionEvent::Warning(format!(
                "the {provider} response was cut off at max_tokens"
            )));
        }
        if ending.arrived {
            self.flush(out, true).await?;
            if out.tool_uses == 0 {
                // The user's turn.
                self.append("\n@You:").await?;
                self.inner.executor.conversation().sync().await?;
            }
        } else {
            self.remove_header(ending.separator).await?;
            self.emit(SessionEvent::Warning(format!(
                "the {provider} response was empty"
            )));
        }
        Ok(())
    }

    /// Writes the stream's events into the conversation; returns whether the user cancelled.
    async fn stream_into(
        &self,
        stream: &mut flemma_providers::EventStream,
        control: &Control,
        out: &mut Output,
    ) -> Result<bool, SessionError> {
        loop {
            let event = tokio::select! {
                biased;
                () = control.token.cancelled() => return Ok(true),
                event = stream.next() => event,
            };
            let Some(event) = event else {
                return Ok(false);
            };
            self.observe(&event, out);
            let piece = out.writer.apply(&event);
            if piece.contains('\r') {
                out.pending.push_str(&piece.replace("\r\n", "\n"));
            } else {
                out.pending.push_str(&piece);
            }
            if out.last_flush.elapsed() >= self.inner.flush_interval {
                self.flush(out, false).await?;
            }
        }
    }

    /// The events a UI sees for one stream event.
    fn observe(&self, event: &StreamEvent, out: &mut Output) {
        if let Some(reply) = &mut out.reply {
            reply.observe(event);
        }
        let ui = match event {
            StreamEvent::Text { text } => SessionEvent::TextDelta(text.clone()),
            StreamEvent::Thinking { text } => SessionEvent::ThinkingDelta(text.clone()),
            StreamEvent::ToolCallStart { id, name } => SessionEvent::ToolCallStarted {
                id: ToolUseId::sanitized(id),
                name: ToolName::sanitized(name),
            },
            StreamEvent::ToolCall {
                id,
                name,
                arguments,
            } => {
                out.tool_uses += 1;
                SessionEvent::ToolCall {
                    id: ToolUseId::sanitized(id),
                    name: ToolName::sanitized(name),
                    input: arguments.clone(),
                }
            }
            StreamEvent::Usage(usage) => {
                out.usage = Some(*usage);
                return;
            }
            StreamEvent::Response { id, model } => {
                // The stream runs inside the request's `chat` span.
                crate::telemetry::record_response(
                    &tracing::Span::current(),
                    id.as_deref(),
                    model.as_deref(),
                );
                return;
            }
            _ => return,
        };
        self.emit(ui);
    }

    /// What a request to `provider` is built with: the prompt builder under the
    /// conversation's options, the request options (the offered tools included).
    pub(super) async fn building(&self, provider: &dyn Provider) -> Result<Building, SessionError> {
        let inner = &self.inner;
        let transcript = inner.transcript();
        let registry = transcript.registry();
        // The tool list is part of the prompt-cache prefix: it waits for the tool sources
        // (spec §4.3), and a request never goes out with a tool set other than the one the
        // conversation asked for (spec §5.4-§5.6).
        registry.ready().await;
        let evaluated = transcript.evaluated().await?;
        evaluated.check()?;
        let options = evaluated.options();
        let names = registry.names();
        let request_options = inner.request_options(provider, options);
        let template_tools = names
            .iter()
            .filter(|n| registry.has_capability(n.as_str(), Capability::EmitsTemplate))
            .map(ToString::to_string);
        let mut builder = PromptBuilder::new()
            .engine(std::sync::Arc::clone(&inner.engine))
            .variables(evaluated.variables().clone())
            .template_tools(template_tools);
        // `@./file` references and `__dirname` follow the conversation's file, resolved
        // (a relative path from a host's own `Conversation` included): as the cycle's
        // settings have it when they are of these options.
        let settings = transcript
            .settings()
            .await
            .ok()
            .filter(|settings| std::sync::Arc::ptr_eq(settings.evaluated().options(), options));
        let chat = match &settings {
            Some(settings) => settings.chat().map(Path::to_path_buf),
            None => transcript
                .conversation()
                .path()
                .map(flemma_config::conversation_path),
        };
        if let Some(chat) = chat {
            builder = builder.chat_path(chat);
        }
        // References and `include()` read inside the project and the store unless
        // `templates.file_access` says otherwise.
        // (From the settings of these options when they are built.)
        let store = transcript.store_directory(options);
        // The usage log is kept for a conversation with a file (an unnamed conversation's
        // store is a temporary directory of this process: its session counts its usage).
        let log_store = store
            .as_ref()
            .filter(|_| transcript.conversation().path().is_some())
            .cloned();
        builder = builder.file_access(FileAccess::from_options(
            &options.templates,
            store.as_deref(),
        ));
        Ok(Building {
            builder,
            request_options,
            autopilot: options.tools.autopilot.clone(),
            log_store,
            capture: options.telemetry.capture_content && crate::telemetry::listening(),
        })
    }

    /// The request for the conversation as it is now, and its autopilot options: built
    /// from the executor's [`Transcript`](crate::transcript::Transcript) (its parse
    /// and its evaluation of the frontmatter, shared with the tool cycle).
    async fn prepare(&self, provider: &dyn Provider) -> Result<Prepared, SessionError> {
        let Building {
            builder,
            request_options,
            autopilot,
            log_store,
            capture,
        } = self.building(provider).await?;
        let transcript = self.inner.transcript();
        let (built, diagnostics, captured) = transcript
            .read(|doc, _| {
                let mut prompt = builder.build(doc);
                let captured = capture.then(|| crate::telemetry::content::Input::of(&prompt));
                let error = prompt
                    .diagnostics
                    .iter()
                    .find(|d| d.severity == Severity::Error)
                    .map(|d| SessionError::Template {
                        line: d.line,
                        message: d.message.clone(),
                    });
                let built = match error {
                    Some(error) => Err(error),
                    None if prompt.messages.is_empty() => Err(SessionError::NothingToSend),
                    None => Ok(provider.build_request(&prompt, &request_options)),
                };
                // The request owns its body: the diagnostics can leave the prompt.
                (built, std::mem::take(&mut prompt.diagnostics), captured)
            })
            .await?;
        for diagnostic in &diagnostics {
            if diagnostic.severity == Severity::Error {
                break;
            }
            let mut warning = String::with_capacity(16 + diagnostic.message.len());
            warning.push_str("line ");
            push_decimal(&mut warning, diagnostic.line);
            warning.push_str(": ");
            warning.push_str(&diagnostic.message);
            self.emit(SessionEvent::Warning(warning));
        }
        Ok(Prepared {
            request: built?,
            autopilot,
            model: request_options.model.clone(),
            max_tokens: request_options.max_tokens,
            store: log_store,
            captured,
        })
    }

    /// Accounts for what a request used: its cost at the session's prices, the run's totals,
    /// a [`SessionEvent::Usage`], and a line in the conversation's usage log (a log that
    /// cannot be written is a warning: the response is not lost for it).
    pub(super) fn account(
        &self,
        turn: u64,
        provider: &str,
        model: &str,
        store: Option<&Path>,
        usage: flemma_providers::Usage,
        compaction: bool,
    ) {
        crate::telemetry::record_usage(&tracing::Span::current(), &usage);
        let cost = crate::usage::cost_of(&self.inner.models, provider, model, &usage);
        let run = {
            let mut state = self.inner.lock_usage();
            state.run.add(&usage, cost);
            state.session.add(&usage, cost);
            state.last_input = usage.input;
            if store.is_some() {
                state.log = store.map(Path::to_path_buf);
            }
            state.run
        };
        let mut record = crate::usage::UsageRecord::now(provider, model, usage, cost);
        record.compaction = compaction;
        // Each log with the store writes of its conversation: a conversation kept elsewhere
        // (an object in a bucket) copies its log there, as it does its results.
        let mut logs: Vec<(
            std::path::PathBuf,
            Option<Arc<dyn flemma_store::StoreWrites>>,
        )> = store
            .map(|dir| (dir.to_path_buf(), self.conversation().store_writes()))
            .into_iter()
            .collect();
        // A subagent's request counts for every session above it, and in their logs.
        let mut inherited = record.clone();
        inherited.subagent = true;
        for ancestor in self.inner.ancestors() {
            let mut state = ancestor.lock_usage();
            state.run.add(&usage, cost);
            state.session.add(&usage, cost);
            if let Some(log) = state
                .log
                .clone()
                .filter(|log| !logs.iter().any(|(dir, _)| dir == log))
            {
                logs.push((log, ancestor.executor.conversation().store_writes()));
            }
        }
        for (at, (dir, writes)) in logs.iter().enumerate() {
            let written = if at == 0 && store.is_some() {
                &record
            } else {
                &inherited
            };
            let log = crate::usage::UsageLog::in_store(dir);
            let appended = log.append(written);
            if appended.is_ok()
                && let Some(writes) = writes
            {
                writes.installed(log.path());
            }
            if let Err(error) = appended {
                self.emit(SessionEvent::Warning(format!(
                    "usage not recorded: {}",
                    flemma_ids::error_chain(&error)
                )));
            }
        }
        self.emit(SessionEvent::Usage(crate::usage::RequestUsage {
            turn,
            provider: provider.to_owned(),
            model: model.to_owned(),
            usage,
            cost,
            run,
            compaction,
        }));
    }

    /// Appends `@Assistant:` (after a blank line unless the text ends with one); returns
    /// whether the blank line was added.
    async fn write_header(&self) -> Result<bool, SessionError> {
        let snapshot = self.conversation().snapshot().await?;
        let text = snapshot.text.as_str();
        let body = text.strip_suffix('\n').unwrap_or(text);
        let body = body.strip_suffix('\r').unwrap_or(body);
        let separator = !(body.is_empty() || body.ends_with('\n'));
        drop(snapshot);
        let header = if separator {
            "\n@Assistant:"
        } else {
            "@Assistant:"
        };
        self.append(header).await?;
        Ok(separator)
    }

    /// Appends lines of the response being written, [`Durability::Buffered`]: nothing of a
    /// response is durable before [`Conversation::sync`] at its end (a crash before then
    /// loses at most the lines since the request was sent, the text before is never touched;
    /// see the book's decision record 0086).
    ///
    /// [`Conversation::sync`]: crate::Conversation::sync
    async fn append(&self, text: &str) -> Result<(), SessionError> {
        self.inner
            .executor
            .append_lines(text, Durability::Buffered)
            .await?;
        Ok(())
    }

    /// Writes the complete lines of the response (all of it when `last`), keeping trailing
    /// blank lines until more text follows them.
    async fn flush(&self, out: &mut Output, last: bool) -> Result<(), SessionError> {
        out.last_flush = Instant::now();
        let end = if last {
            out.pending.len()
        } else {
            match out.pending.rfind('\n') {
                Some(end) => end,
                None => return Ok(()),
            }
        };
        let lines = out.pending[..end].trim_end_matches(['\n', '\r']);
        if lines.is_empty() {
            if last {
                out.pending.clear();
            }
            return Ok(());
        }
        let written = lines.len();
        self.append(lines).await?;
        out.flushed = true;
        // The line's terminator goes with it; later blank lines stay pending.
        let rest = (written + 1).min(out.pending.len());
        out.pending.drain(..rest);
        if last {
            out.pending.clear();
        }
        Ok(())
    }

    /// When the conversation ends with a response the stream cut (its last segment is an
    /// abort marker whose message begins `Response incomplete`, and it has no tool use) after
    /// a message of the user, removes that response, so that the request it answered is sent
    /// again; returns whether it did. A cut response with complete tool uses is left to the
    /// tool cycle instead (its calls are answered with the marker's message).
    pub(super) async fn drop_incomplete_response(&self) -> Result<bool, SessionError> {
        let removed = self
            .inner
            .transcript()
            .edit(|doc, text| {
                let [.., asked, last] = doc.messages.as_slice() else {
                    return Ok(Vec::new());
                };
                let incomplete = last.role == Role::Assistant
                    && last.is_aborted()
                    && last.tool_uses().next().is_none()
                    && last.segments.iter().rev().find_map(|s| match s {
                        Segment::Aborted(a) => Some(a.message.starts_with(INCOMPLETE)),
                        _ => None,
                    }) == Some(true);
                if !incomplete || asked.role != Role::You {
                    return Ok(Vec::new());
                }
                let lines: Vec<&str> = text.split_inclusive('\n').collect();
                let mut first = last.span.start_line.saturating_sub(1) as usize;
                // The blank line written before `@Assistant:` goes with it.
                if first > 0 && lines.get(first - 1).is_some_and(|l| l.trim().is_empty()) {
                    first -= 1;
                }
                Ok(vec![TextEdit::replace(
                    first as u32 + 1,
                    lines.len() as u32,
                    Vec::new(),
                )])
            })
            .await;
        match removed {
            Ok(Some(_)) => {
                self.emit(SessionEvent::Warning(
                    "the last response was incomplete: it was removed and the request is sent again"
                        .to_owned(),
                ));
                Ok(true)
            }
            // Nothing to remove, or the text kept changing: left as it is.
            Ok(None) | Err(TranscriptError::Busy) => Ok(false),
            Err(other) => Err(other.into()),
        }
    }

    /// Removes the `@Assistant:` header written for a response that brought nothing (and the
    /// blank line written before it), unless someone wrote after it meanwhile.
    async fn remove_header(&self, separator: bool) -> Result<(), SessionError> {
        let removed = self
            .inner
            .transcript()
            .edit(|_, text| {
                let lines: Vec<&str> = text.split_inclusive('\n').collect();
                let Some(last) = lines.iter().rposition(|l| !l.trim().is_empty()) else {
                    return Ok(Vec::new());
                };
                if lines[last].trim_end() != "@Assistant:" {
                    return Ok(Vec::new());
                }
                let blank_before = last > 0 && lines[last - 1].trim().is_empty();
                let first = if separator && blank_before {
                    last - 1
                } else {
                    last
                };
                Ok(vec![TextEdit::replace(
                    first as u32 + 1,
                    lines.len() as u32,
                    Vec::new(),
                )])
            })
            .await;
        match removed {
            Ok(_) | Err(TranscriptError::Busy) => Ok(()),
            Err(other) => Err(other.into()),
        }
    }
}

/// The abort marker under a response the stream cut: `<!-- flemma:aborted:
/// Response incomplete: <cause>. -->`, on one line whatever `cause` holds.
fn incomplete_marker(cause: &str) -> String {
    let cause = cause
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace("-->", "->");
    let cause = cause.trim_end_matches('.');
    format!("<!-- flemma:aborted: {INCOMPLETE}: {cause}. -->")
}

#[cfg(test)]
mod tests {
    #[test]
    fn decimals_are_written_as_the_formatter_writes_them() {
        for n in [0, 7, 10, 99, 100, 4_096, 65_535, 1_000_000, u32::MAX] {
            let mut out = String::from("line ");
            super::push_decimal(&mut out, n);
            assert_eq!(out, format!("line {n}"));
        }
    }
}

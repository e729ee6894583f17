//! Compaction in the loop: before a request that would fill too much of the model's context
//! window ([`Session::compact_if_needed`]), or when a host asks ([`Session::compact`]).
//!
//! What each source may change here: the host (its code, its options files) turns compaction
//! on or off, sets its threshold and the turns kept, and gives instructions; a frontmatter may
//! only turn it off (`compaction.enabled` cannot be widened); a `PreCompact` hook (the host's)
//! may cancel it or add instructions for the summary. The model writes the summary: its words
//! go into the block's fence (longer than any backtick run in them, so they start no message,
//! call or result) and are sent framed as a model's words
//! ([`flemma_providers::COMPACTION_PREFIX`]). Nothing anyone writes can approve a call or
//! widen a setting through it.

use std::sync::Arc;

use flemma_ast::modeline::{Key, Modeline, Value};
use flemma_ast::{Document, Message};
use flemma_providers::{OnRetry, Part, PromptMessage, PromptRole, Provider, Retry, StreamEvent};
use futures_util::StreamExt as _;
use tokio_util::sync::CancellationToken;

use super::{Running, Session, SessionError, SessionEvent};
use crate::compaction::{self, CompactOutcome, Compacted, Cut, SUMMARY_INSTRUCTIONS};
use crate::hooks::{CompactTrigger, HookEvent, PostCompactInput, PreCompactInput};

/// The instructions of a summary request: ours, then the host's, then the hooks'.
fn instructions(host: Option<&str>, hooks: &[(String, String)]) -> String {
    let mut text = SUMMARY_INSTRUCTIONS.to_owned();
    if let Some(host) = host.map(str::trim).filter(|t| !t.is_empty()) {
        text.push_str("\n\nAlso: ");
        text.push_str(host);
    }
    for (hook, extra) in hooks {
        text.push_str("\n\nAlso (hook `");
        text.push_str(hook);
        text.push_str("`): ");
        text.push_str(extra.trim());
    }
    text
}

/// The part of `doc` a summary is written from: its messages above the cut.
fn head(doc: &Document, cut: &Cut) -> Document {
    Document {
        frontmatter: doc.frontmatter.clone(),
        preamble: None,
        messages: doc.messages[..cut.before].to_vec(),
        diagnostics: Vec::new(),
        line_count: doc.line_count,
    }
}

/// What the summary request's stream gave.
struct Summary {
    text: String,
    usage: Option<flemma_providers::Usage>,
}

impl Session {
    /// Compacts the conversation now, whatever its size: the messages above the latest
    /// `compaction.keep_turns` responses are summarised by the session's model into a
    /// `**Compaction:**` block (see [`compaction`](crate::compaction)). `instructions` are
    /// added to the summary request's (Claude Code's `custom_instructions`). Runs the
    /// `PreCompact` and `PostCompact` hooks with the trigger `manual`.
    ///
    /// # Errors
    ///
    /// [`SessionError::RequestInFlight`] / [`SessionError::AlreadyRunning`] while the session
    /// runs; [`SessionError::NoProvider`] for a session without a model; the send and stream
    /// errors of the summary request; [`SessionError::Cancelled`] when
    /// [`cancel`](Self::cancel) stopped it; [`SessionError::EmptySummary`];
    /// [`SessionError::CompactionConflict`] when the conversation changed above the cut
    /// meanwhile. Nothing is written then.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use flemma_providers::{ScriptedProvider, Turn};
    /// use flemma_runtime::{MemoryConversation, Session, ToolRegistry};
    /// use flemma_runtime::compaction::CompactOutcome;
    ///
    /// let chat = Arc::new(MemoryConversation::new(
    ///     "```json\n{\"flemma\": {\"compaction\": {\"keep_turns\": 1}}}\n```\n\
    ///      @You:\nName a colour.\n\n@Assistant:\nBlue.\n\n@You:\nAnother?\n\n@Assistant:\nRed.\n\n@You:\nAnd?\n",
    /// ));
    /// let model = Arc::new(ScriptedProvider::new([Turn::text("They named blue.")]));
    /// let session = Session::builder(chat.clone(), ToolRegistry::new(), model).build();
    /// let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    /// let outcome = runtime.block_on(session.compact(None))?;
    /// assert!(matches!(outcome, CompactOutcome::Compacted(c) if c.messages == 2));
    /// // Above the block, the first exchange stays in the file; below it, the last one.
    /// assert!(chat.text().contains("Blue.\n\n@You:\n**Compaction:** (messages=2 tokens=5 summary=4)\n```\nThey named blue.\n```\n\n@You:\nAnother?"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub async fn compact(
        &self,
        instructions: Option<&str>,
    ) -> Result<CompactOutcome, SessionError> {
        let Some(provider) = self.inner.provider.clone() else {
            return Err(SessionError::NoProvider);
        };
        let control = self.claim()?;
        let _running = Running(&self.inner);
        self.compact_with(
            provider.as_ref(),
            &control.token,
            CompactTrigger::Manual,
            instructions,
            0,
        )
        .await
    }

    /// Before request `turn`: compacts the conversation when `compaction.enabled` and the
    /// request is estimated to exceed `compaction.threshold` of the model's context window
    /// (a model the table does not know is never compacted on its own). A compaction that
    /// fails is a warning: the request goes out as it is.
    pub(super) async fn compact_if_needed(
        &self,
        provider: &dyn Provider,
        cancel: &CancellationToken,
        turn: u64,
    ) -> Result<(), SessionError> {
        let transcript = self.inner.transcript();
        let evaluated = transcript.evaluated().await?;
        let options = evaluated.options();
        let settings = options.compaction;
        if !settings.enabled {
            return Ok(());
        }
        if !(settings.threshold > 0.0 && settings.threshold <= 1.0) {
            self.emit(SessionEvent::Warning(format!(
                "compaction.threshold is {}: it must be above 0 and at most 1; the conversation is not compacted",
                settings.threshold
            )));
            return Ok(());
        }
        let request = self.inner.request_options(provider, options);
        let Some(window) = self
            .inner
            .models
            .get(provider.name(), &request.model)
            .and_then(|m| m.context_window)
        else {
            return Ok(());
        };
        let last_input = self.inner.lock_usage().last_input;
        let estimate = transcript
            .read(|doc, _| compaction::estimate_tokens(doc, &request.tools))
            .await?
            .max(last_input);
        #[allow(
            clippy::cast_precision_loss,
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            reason = "a share of a token count: exact enough"
        )]
        let limit = (window as f64 * settings.threshold) as u64;
        if estimate <= limit {
            return Ok(());
        }
        match self
            .compact_with(provider, cancel, CompactTrigger::Auto, None, turn)
            .await
        {
            Ok(CompactOutcome::Cancelled { hook, reason }) => {
                self.emit(SessionEvent::Warning(format!(
                    "not compacted: hook '{hook}' cancelled it: {reason}"
                )));
            }
            Ok(CompactOutcome::NothingToCompact) => {
                self.emit(SessionEvent::Warning(format!(
                    "the next request is about {estimate} tokens of {window}, and nothing can be compacted"
                )));
            }
            Ok(_) => {}
            Err(error) => {
                self.emit(SessionEvent::Warning(format!(
                    "not compacted: {}",
                    flemma_ids::error_chain(&error)
                )));
            }
        }
        Ok(())
    }

    /// Compacts: finds the cut, asks the hooks, sends the summary request, writes the block.
    async fn compact_with(
        &self,
        provider: &dyn Provider,
        cancel: &CancellationToken,
        trigger: CompactTrigger,
        host_instructions: Option<&str>,
        turn: u64,
    ) -> Result<CompactOutcome, SessionError> {
        let transcript = self.inner.transcript();
        let keep = transcript
            .evaluated()
            .await?
            .options()
            .compaction
            .keep_turns;
        let (doc, _) = transcript.document().await?;
        let Some(cut) = compaction::find_cut(&doc, keep) else {
            return Ok(CompactOutcome::NothingToCompact);
        };
        let hooks = self.hooks().await?;
        let mut extra = Vec::new();
        if hooks.has(HookEvent::PreCompact) {
            let event =
                PreCompactInput::new(self.hook_context(), trigger, cut.messages, cut.tokens)
                    .with_instructions(host_instructions.map(str::to_owned));
            let outcome = hooks.pre_compact(&event).await;
            self.warn_all(outcome.warnings);
            if let Some((hook, reason)) = outcome.cancel {
                return Ok(CompactOutcome::Cancelled { hook, reason });
            }
            extra = outcome.instructions;
        }
        self.emit(SessionEvent::Compacting {
            trigger,
            messages: cut.messages,
            tokens: cut.tokens,
        });
        let span = crate::telemetry::compaction(trigger.as_str(), cut.messages, cut.tokens);
        let written = tracing::Instrument::instrument(
            async {
                let text = instructions(host_instructions, &extra);
                let (summary, summary_tokens) = self
                    .summarise(provider, cancel, &doc, &cut, text, turn)
                    .await?;
                let line = self
                    .write_block(&doc, &cut, &summary, summary_tokens)
                    .await?;
                Ok::<_, SessionError>((summary, summary_tokens, line))
            },
            span.clone(),
        )
        .await;
        let (text, summary_tokens, line) = match written {
            Ok(written) => written,
            Err(error) => {
                crate::telemetry::record_error(&span, error.kind());
                return Err(error);
            }
        };
        let text = text.as_str();
        // The next request is the compacted one: the last one's size says nothing of it.
        self.inner.lock_usage().last_input = 0;
        let compacted = Compacted {
            trigger,
            messages: cut.messages,
            tokens: cut.tokens,
            summary_tokens,
            line,
        };
        if hooks.has(HookEvent::PostCompact) {
            let event = PostCompactInput::new(
                self.hook_context(),
                trigger,
                (cut.messages, cut.tokens, summary_tokens),
                text,
            );
            let warnings = hooks.post_compact(&event).await;
            self.warn_all(warnings);
        }
        self.emit(SessionEvent::Compacted(compacted.clone()));
        Ok(CompactOutcome::Compacted(compacted))
    }

    /// Sends the summary request of `cut` (the conversation above it, then `instructions`)
    /// in a `chat` span of its own; the summary and its tokens. Its usage is accounted
    /// whatever happens.
    async fn summarise(
        &self,
        provider: &dyn Provider,
        cancel: &CancellationToken,
        doc: &Document,
        cut: &Cut,
        instructions: String,
        turn: u64,
    ) -> Result<(String, u64), SessionError> {
        let building = self.building(provider).await?;
        let head = head(doc, cut);
        let mut prompt = building.builder.build(&head);
        prompt.messages.push(PromptMessage {
            role: PromptRole::User,
            parts: vec![Part::text(instructions)],
        });
        let request = provider.build_request(&prompt, &building.request_options);
        let captured = building
            .capture
            .then(|| crate::telemetry::content::Input::of(&prompt));
        drop(prompt);
        drop(head);
        let name = provider.name().to_owned();
        let model = building.request_options.model.clone();
        let span = crate::telemetry::chat(
            self.inner.transcript().conversation_id(),
            &name,
            &model,
            building.request_options.max_tokens,
            turn,
            true,
        );
        if let Some(input) = &captured {
            input.record(&span);
        }
        let summary =
            tracing::Instrument::instrument(self.summary(provider, cancel, request), span.clone())
                .await;
        let (summary, usage) = match summary {
            Ok(summary) => (Ok(summary.text), summary.usage),
            Err((error, usage)) => (Err(error), usage),
        };
        if let Some(usage) = usage {
            let _entered = span.enter();
            self.account(
                turn,
                &name,
                &model,
                building.log_store.as_deref(),
                usage,
                true,
            );
        }
        let text = match summary {
            Ok(text) => text.trim().to_owned(),
            Err(error) => {
                crate::telemetry::record_error(&span, error.kind());
                return Err(error);
            }
        };
        if text.is_empty() {
            crate::telemetry::record_error(&span, "empty_summary");
            return Err(SessionError::EmptySummary { provider: name });
        }
        if captured.is_some() {
            crate::telemetry::content::Reply::from_text(text.clone())
                .record(&span, Some(&flemma_providers::StopReason::EndTurn));
        }
        let tokens = usage
            .map(|u| u.output)
            .filter(|&n| n > 0)
            .unwrap_or_else(|| (text.len() as u64).div_ceil(4));
        Ok((text, tokens))
    }

    /// Writes the block of `cut` with `summary` into the conversation, when the messages
    /// above the cut are still those of `doc`; returns the line of its marker.
    async fn write_block(
        &self,
        doc: &Document,
        cut: &Cut,
        summary: &str,
        summary_tokens: u64,
    ) -> Result<u32, SessionError> {
        let transcript = self.inner.transcript();
        let mut meta = Modeline::new();
        for (key, value) in [
            ("messages", cut.messages),
            ("tokens", cut.tokens),
            ("summary", summary_tokens),
        ] {
            meta.insert(
                Key::Named(key.to_owned()),
                Value::Integer(i64::try_from(value).unwrap_or(i64::MAX)),
            );
        }
        let writer = transcript.settings().await?.writer;
        let above: &[Message] = &doc.messages[..cut.before];
        let line = doc.messages[cut.before].span.start_line;
        transcript
            .edit(|now, _| {
                if now.messages.get(..cut.before) != Some(above) {
                    return Err(SessionError::CompactionConflict);
                }
                let edit =
                    flemma_ast::writer::insert_compaction(now, cut.before, summary, &meta, writer)
                        .map_err(|_| SessionError::CompactionConflict)?;
                Ok(vec![edit])
            })
            .await?;
        Ok(line)
    }

    /// Sends the summary request and reads its text (thinking and tool calls are not the
    /// summary); on failure, the error and the usage reported before it.
    async fn summary(
        &self,
        provider: &dyn Provider,
        cancel: &CancellationToken,
        request: flemma_providers::Request,
    ) -> Result<Summary, (SessionError, Option<flemma_providers::Usage>)> {
        let inner = Arc::clone(&self.inner);
        let on_retry: OnRetry = Arc::new(move |retry: &Retry| {
            inner
                .subscribers
                .emit(SessionEvent::Retrying(retry.clone()));
        });
        let name = provider.name().to_owned();
        let started = tokio::select! {
            biased;
            () = cancel.cancelled() => return Err((SessionError::Cancelled, None)),
            stream = provider.stream_observed(request, on_retry) => stream,
        };
        let mut stream = started.map_err(|source| {
            (
                SessionError::Send {
                    provider: name.clone(),
                    source,
                },
                None,
            )
        })?;
        let mut out = Summary {
            text: String::new(),
            usage: None,
        };
        loop {
            let event = tokio::select! {
                biased;
                () = cancel.cancelled() => return Err((SessionError::Cancelled, out.usage)),
                event = stream.next() => event,
            };
            match event {
                None => return Ok(out),
                Some(StreamEvent::Text { text }) => out.text.push_str(&text),
                Some(StreamEvent::Usage(usage)) => out.usage = Some(usage),
                // The summary request runs inside its `chat` span.
                Some(StreamEvent::Response { id, model }) => crate::telemetry::record_response(
                    &tracing::Span::current(),
                    id.as_deref(),
                    model.as_deref(),
                ),
                Some(StreamEvent::Error { message }) => {
                    return Err((
                        SessionError::Stream {
                            provider: name,
                            message,
                        },
                        out.usage,
                    ));
                }
                Some(_) => {}
            }
        }
    }
}

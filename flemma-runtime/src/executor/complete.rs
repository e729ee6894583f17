//! Completion: a finished call's output stored or saved, then its result
//! written; the one path both foreground calls and background jobs take.

use std::sync::Arc;

use flemma_ast::writer::{ResultBody, WriterOptions};
use flemma_ids::{JobId, ToolName, ToolUseId};
use flemma_store::{SaveOutcome, Store};

use super::ran::RanResult;
use super::state::{Claimed, Executor, Finished, Settings};
use super::types::{Completed, ExecutorError};
use crate::events::Event;
use flemma_core::ToolOutput;
use flemma_core::sandbox::Sandbox;

/// The name a stored output is filed under.
pub(super) enum StoreId {
    /// A foreground call's tool use id.
    Tool(ToolUseId),
    /// A background job's id (`source = "job"`).
    Job(JobId),
}

/// A finished call's output on its way to the store.
pub(super) struct Completion {
    pub(super) id: StoreId,
    pub(super) tool: ToolName,
    /// The `flemma.save_to` destination and the text written there (a success's).
    pub(super) save: Option<(String, String)>,
    /// The text the store materialises (when it does), and whether the call succeeded.
    pub(super) materialize: Option<(String, bool)>,
}

impl Executor {
    /// Completion of calls that finished together: store materialisation or
    /// `flemma.save_to` for each, then their results in one edit (each under the input it
    /// ran with, see [`write_ran`](Self::write_ran)), then their claims released.
    pub(super) async fn finish_all(
        &self,
        batch: Vec<(Finished, Option<Claimed>)>,
        settings: &Settings,
    ) -> Result<Vec<Completed>, ExecutorError> {
        let (deferred, batch): (Vec<_>, Vec<_>) =
            batch.into_iter().partition(|(f, _)| f.deferred.is_some());
        if !deferred.is_empty() {
            self.defer_all(deferred, settings).await?;
        }
        let mut results = Vec::with_capacity(batch.len());
        let mut done = Vec::with_capacity(batch.len());
        for (finished, claimed) in batch {
            let (body, completed) = self.result_of(finished, settings).await;
            let (claim, input) = claimed.map_or((None, None), |c| (c.hold, Some(c.input)));
            results.push(RanResult {
                id: completed.id.clone(),
                tool: completed.tool.clone(),
                body,
                input,
            });
            done.push((completed, claim));
        }
        self.write_ran(&results, settings.shared.writer).await?;
        let mut completed = Vec::with_capacity(done.len());
        for (call, claim) in done {
            self.emit(Event::ToolCompleted {
                id: call.id.clone(),
                tool: call.tool.clone(),
                success: call.success,
            });
            self.release_claim(claim, settings).await;
            completed.push(call);
        }
        Ok(completed)
    }

    /// Calls that ended without a result ([`flemma_core::ExecutionContext::defer`]): their
    /// blocks go back to `(approved)` in one edit, this executor keeps them decided (so its
    /// next cycle runs them again; another host decides them again), their claims are released
    /// and a [`Event::CallDeferred`] says what each awaits.
    async fn defer_all(
        &self,
        deferred: Vec<(Finished, Option<Claimed>)>,
        settings: &Settings,
    ) -> Result<(), ExecutorError> {
        self.edit_indexed(|doc, index| {
            let mut edits = Vec::with_capacity(deferred.len());
            for (finished, _) in &deferred {
                match flemma_ast::writer::set_status_in(
                    doc,
                    index,
                    finished.id.as_str(),
                    Some(flemma_ast::ToolStatus::Approved),
                ) {
                    Ok(edit) => edits.push(edit),
                    // The block went away meanwhile: nothing to put back.
                    Err(flemma_ast::AstError::UnknownToolResult { .. }) => {}
                    Err(error) => {
                        return Err(crate::transcript::TranscriptError::Edit(error).into());
                    }
                }
            }
            Ok(edits)
        })
        .await?;
        for (finished, claimed) in deferred {
            let Finished {
                id, tool, deferred, ..
            } = finished;
            let hold = claimed.map(|claimed| {
                self.decided()
                    .insert(id.clone(), crate::placements::input_digest(&claimed.input));
                claimed.hold
            });
            self.release_claim(hold.flatten(), settings).await;
            self.emit(Event::CallDeferred {
                id,
                tool,
                reason: deferred.unwrap_or_default(),
            });
        }
        Ok(())
    }

    /// The result block's body of a finished call (store materialisation or
    /// `flemma.save_to` done, on the blocking pool), and what the report says of it.
    pub(super) async fn result_of(
        &self,
        done: Finished,
        settings: &Settings,
    ) -> (ResultBody, Completed) {
        let Finished {
            id,
            tool,
            output,
            save_to,
            overflow,
            overflow_error,
            // A background call cannot wait for a person: its output is delivered as it is.
            deferred: _,
        } = done;
        if let Some(error) = overflow_error {
            self.emit(Event::Warning(format!("full output not stored: {error}")));
        }
        let output = self
            .post_tool_use(settings, &id, &tool, output, overflow.is_some())
            .await;
        let success = output.is_success();
        let mut body = None;
        if let Some(store) = &settings.shared.store {
            let completion = match (save_to, &output) {
                (Some(dest), ToolOutput::Success(result)) => Some(Completion {
                    id: StoreId::Tool(id.clone()),
                    tool: tool.clone(),
                    save: Some((dest, result.to_text())),
                    materialize: None,
                }),
                // The error and its partial output, already joined canonically.
                _ if overflow.is_none() && store.materializes() => Some(Completion {
                    id: StoreId::Tool(id.clone()),
                    tool: tool.clone(),
                    save: None,
                    materialize: Some((output.result_text(), success)),
                }),
                _ => None,
            };
            if let Some(completion) = completion {
                body = self
                    .store_output(store, &settings.shared.sandbox, completion)
                    .await
                    .map(ResultBody::Success);
            }
        }
        let body = body.unwrap_or_else(|| output.into_result_body());
        (body, Completed { id, tool, success })
    }

    /// The one completion path of a finished call's output, foreground or job: the `flemma.save_to`
    /// redirect of a success (returns the text its block holds instead: the stub, or the content
    /// with the notice when it was not saved), else the store's materialisation when it
    /// materialises (returns `None`: the block holds the output). The writes run on the blocking
    /// pool; failures are warnings.
    pub(super) async fn store_output(
        &self,
        store: &Arc<Store>,
        sandbox: &Sandbox,
        completion: Completion,
    ) -> Option<String> {
        let Completion {
            id,
            tool,
            save,
            materialize,
        } = completion;
        let store = Arc::clone(store);
        if let Some((dest, text)) = save {
            let sandbox = sandbox.clone();
            // Shared with the blocking task, so that it comes back even if the task never ran.
            let text = Arc::new(text);
            let shared = Arc::clone(&text);
            let saved = tokio::task::spawn_blocking(move || {
                store.save_to(&dest, &shared, sandbox.save_to_check())
            })
            .await;
            return Some(match saved {
                Ok(SaveOutcome::Saved { stub, .. }) => stub,
                Ok(SaveOutcome::NotSaved { content, error }) => {
                    self.emit(Event::Warning(format!("flemma.save_to: {error}")));
                    content
                }
                Err(error) => {
                    self.emit(Event::Warning(format!("flemma.save_to: {error}")));
                    String::clone(&text)
                }
            });
        }
        let (text, success) = materialize?;
        let what = match &id {
            StoreId::Tool(_) => "result",
            StoreId::Job(_) => "job result",
        };
        let written = tokio::task::spawn_blocking(move || {
            let body = if success {
                flemma_store::ResultBody::Success { output: &text }
            } else {
                flemma_store::ResultBody::Error {
                    error: &text,
                    partial_output: None,
                }
            };
            let id: flemma_store::ResultId<'_> = match &id {
                StoreId::Tool(id) => id.into(),
                StoreId::Job(id) => id.into(),
            };
            store.materialize(id, Some(&tool), &body).map(|_| ())
        })
        .await;
        let error = match written {
            Ok(Ok(())) => return None,
            Ok(Err(error)) => error.to_string(),
            Err(error) => error.to_string(),
        };
        self.emit(Event::Warning(format!("{what} not stored: {error}")));
        None
    }

    /// Writes a final result, placing a placeholder first when the block went away.
    pub(super) async fn write_final(
        &self,
        id: &ToolUseId,
        body: &ResultBody,
        writer: WriterOptions,
    ) -> Result<(), ExecutorError> {
        self.write_finals(&[(id.clone(), body.clone())], writer)
            .await
    }

    /// Writes final results in one edit; a result whose block went away gets a placeholder
    /// first (the [`Transcript`](crate::transcript::Transcript)'s
    /// [`write_results`](crate::transcript::Transcript::write_results)).
    pub(super) async fn write_finals(
        &self,
        results: &[(ToolUseId, ResultBody)],
        writer: WriterOptions,
    ) -> Result<(), ExecutorError> {
        Ok(self.setup.transcript.write_results(results, writer).await?)
    }
}

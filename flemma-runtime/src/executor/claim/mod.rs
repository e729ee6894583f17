//! Claims: one execution per call, however many hosts open the conversation.
//!
//! Before a host runs an approved call it claims it: under a lock, it reads the conversation
//! again, checks that the call's block is still `(approved)` and empty and that no live host
//! holds a claim on it, and records its own claim. The claim names its owner: the process
//! (pid and start time, so a pid the kernel gave to another process is not taken for it) and
//! the executor within it. The claim is removed, under the same lock, once the call's final
//! result is in the conversation (or the call went to the background, where the job journal
//! takes over).
//!
//! A conversation in a file keeps its claims beside the job journal, one JSON file per call
//! in `<store directory>/calls/`, locked with `flock` on that directory; a conversation without
//! a file keeps them in a table of this process.
//!
//! Every cycle looks at the claims left: a live other host's claim makes the cycle report
//! [`Next::Running`](super::Next::Running) (the conversation is not ready to send); a claim
//! whose owner is gone (its process died, or its executor or cycle was dropped) while its
//! result block is still the empty in-progress block is answered with an error result,
//! [`CALL_LOST`](crate::messages::CALL_LOST), so an interrupted call is never sent as an empty
//! success. A gone owner's claim on a block that is still `(approved)` is dropped: the host died
//! before it started the call (it clears the suffix, then runs), so the call runs now.
//!
//! A claim's name is made durable (one `fsync` of the claims directory for the calls starting
//! together) before its call's block is cleared, so a crash of the machine never leaves a block
//! in progress without its claim, whatever order the file system keeps between files (btrfs
//! keeps none): such a block would be sent as an empty success. The claim's bytes are not
//! synced: a crash can leave its name without them (an empty file); a claim file that does not
//! read as a claim is taken for a gone owner's (claims are written whole and renamed into
//! place, so a live host's always reads), and its in-progress call is answered with the same
//! error. Removing a claim is not synced either: a claim a crash kept, on a block already
//! answered, is a gone owner's claim on a finished call, dropped by the next cycle.

pub(super) mod table;

use std::collections::HashSet;

use flemma_ast::writer::{self, ResultBody};
use flemma_ast::{Document, ToolStatus};
use flemma_ids::{ToolName, ToolUseId};

use self::table::{ClaimRecord, Held, host_holds};
use super::state::{Call, Executor, Settings};
use super::types::{Completed, ExecutorError};
use crate::events::Event;
use crate::messages as msg;
use crate::transcript::TranscriptError;
use flemma_builtins::process::ProcessRefExt as _;
use flemma_core::process::ProcessRef;

/// A call claimed by a host, as [`Executor::claims`] lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CallClaim {
    /// The call.
    pub id: ToolUseId,
    /// The tool.
    pub tool: ToolName,
    /// The process that claimed it, when known.
    pub pid: Option<i32>,
    /// Whether its host still runs it; `false` when the host died or dropped it, so that the
    /// next cycle answers the call with an error.
    pub live: bool,
}

/// Whether a result block is the empty, status-less block of a call in progress.
fn in_progress(doc: &Document, id: &str) -> bool {
    flemma_ast::find_tool_result_by_id(doc, id)
        .is_some_and(|r| r.node.status.is_none() && r.node.content.trim().is_empty())
}

/// The calls whose result block is in progress (empty, status-less), with their tools.
fn calls_in_progress(doc: &Document) -> Vec<(String, String)> {
    let open: HashSet<&str> = doc
        .messages
        .iter()
        .flat_map(flemma_ast::Message::tool_results)
        .filter(|r| r.status.is_none() && r.content.trim().is_empty())
        .map(|r| r.tool_use_id.as_str())
        .collect();
    let mut seen = HashSet::new();
    doc.messages
        .iter()
        .flat_map(flemma_ast::Message::tool_uses)
        .filter(|u| open.contains(u.id.as_str()) && seen.insert(u.id.as_str()))
        .map(|u| (u.id.as_str().to_owned(), u.name.as_str().to_owned()))
        .collect()
}

/// Whether the call `id` is still to run: its block is empty and `(approved)`, or
/// `(pending)` (the host's approver just approved it).
fn still_approved(doc: &Document, index: &flemma_ast::ToolIndex, id: &str) -> bool {
    index.tool_result(doc, id).is_some_and(|r| {
        matches!(
            r.node.status,
            Some(ToolStatus::Approved | ToolStatus::Pending)
        ) && r.node.content.trim().is_empty()
    })
}

impl Executor {
    /// Claims the calls about to start; returns those claimed, each with its hold. A call
    /// another live host holds, or whose block is no longer `(approved)`, is left out.
    pub(super) async fn claim_calls(
        &self,
        calls: Vec<Call>,
        settings: &Settings,
    ) -> Result<Vec<(Call, Option<Held>)>, ExecutorError> {
        if calls.is_empty() {
            return Ok(Vec::new());
        }
        let mut locked = match settings.claims.lock().await {
            Ok(locked) => locked,
            Err(error) => {
                // Without a usable claims directory the calls run as before claims existed.
                self.emit(Event::Warning(format!(
                    "calls not claimed ({error}); another host may run them too"
                )));
                return Ok(calls.into_iter().map(|c| (c, None)).collect());
            }
        };
        let approved: HashSet<String> = self
            .with_index(|doc, index| {
                calls
                    .iter()
                    .filter(|c| still_approved(doc, index, c.id.as_str()))
                    .map(|c| c.id.as_str().to_owned())
                    .collect()
            })
            .await?;
        let owner = ProcessRef::current();
        let mut claimed = Vec::with_capacity(calls.len());
        for call in calls {
            let id = call.id.as_str();
            if !approved.contains(id) {
                tracing::debug!(id, "call no longer approved: another host took it");
                continue;
            }
            if let Some(existing) = locked.get(id)
                && existing.is_live()
            {
                tracing::debug!(id, pid = ?existing.owner.map(|o| o.pid), "call claimed by another host");
                continue;
            }
            let record = ClaimRecord {
                tool_id: id.to_owned(),
                tool: call.tool.as_str().to_owned(),
                owner,
                host: self.claimant.id(),
                claimed_at: crate::jobs::support::now_seconds(),
            };
            if let Err(error) = locked.put(record) {
                self.emit(Event::Warning(format!(
                    "call {id} not claimed ({error}); another host may run it too"
                )));
                claimed.push((call, None));
                continue;
            }
            let held = self.claimant.hold(id);
            claimed.push((call, Some(held)));
        }
        // The claims' names durable before the blocks are cleared (one sync for them all).
        if claimed.iter().any(|(_, held)| held.is_some())
            && let Err(error) = locked.sync()
        {
            tracing::warn!(%error, "call claims not synced; a crash of the machine may lose them");
        }
        Ok(claimed)
    }

    /// Lets go of a call whose final result is written (or that went to the background).
    pub(super) async fn release_claim(&self, held: Option<Held>, settings: &Settings) {
        let Some(held) = held else {
            return;
        };
        match settings.claims.lock().await {
            Ok(mut locked) => {
                let mine = locked
                    .get(&held.id)
                    .is_some_and(|r| r.host == self.claimant.id());
                if mine && let Err(error) = locked.remove(&held.id) {
                    tracing::warn!(id = %held.id, %error, "call claim not removed");
                }
            }
            Err(error) => tracing::warn!(id = %held.id, %error, "call claim not removed"),
        }
        // The record goes first: a claim on record with no hold reads as a gone owner's.
        drop(held);
    }

    /// Whether a claim is not one of the calls this executor runs now.
    fn is_foreign(&self, record: &ClaimRecord) -> bool {
        let mine = self.claimant.id();
        !(record.host == mine && host_holds(mine, &record.tool_id))
    }

    /// Whether another live host (process, or executor of this one) runs a call of this
    /// conversation now.
    pub(super) async fn claimed_elsewhere(&self, settings: &Settings) -> bool {
        let peeked = settings.claims.peek().await;
        peeked.iter().any(|r| self.is_foreign(r) && r.is_live())
    }

    /// Answers the calls whose host is gone with [`msg::CALL_LOST`] and drops gone hosts'
    /// other claims.
    pub(super) async fn settle_claims(
        &self,
        settings: &Settings,
    ) -> Result<Vec<Completed>, ExecutorError> {
        let (peeked, any_torn) = settings.claims.scan().await;
        if !any_torn && !peeked.iter().any(|r| self.is_foreign(r) && !r.is_live()) {
            return Ok(Vec::new());
        }
        let Ok(mut locked) = settings.claims.lock().await else {
            return Ok(Vec::new());
        };
        let mut gone: Vec<ClaimRecord> = locked
            .all()
            .into_iter()
            .filter(|r| self.is_foreign(r) && !r.is_live())
            .collect();
        let (mut lost, in_progress_calls): (Vec<ClaimRecord>, Vec<(String, String)>) = self
            .with_document(|doc, _| {
                let lost = gone
                    .iter()
                    .filter(|r| in_progress(doc, &r.tool_id))
                    .cloned()
                    .collect();
                let calls = if any_torn {
                    calls_in_progress(doc)
                } else {
                    Vec::new()
                };
                (lost, calls)
            })
            .await?;
        // A call in progress whose claim a crash left unreadable: its host is gone with it.
        let in_progress_ids: HashSet<String> =
            in_progress_calls.iter().map(|(id, _)| id.clone()).collect();
        let torn = self.torn_claims(&locked, in_progress_calls);
        lost.extend(torn.iter().cloned());
        gone.extend(torn.iter().cloned());
        let body = ResultBody::Error {
            message: Some(msg::CALL_LOST.to_owned()),
            partial_output: None,
        };
        if !lost.is_empty() {
            let writer = settings.shared.writer;
            self.edit(|doc| {
                let mut edits = Vec::new();
                for record in &lost {
                    // Checked again on the text the edit applies to.
                    if !in_progress(doc, &record.tool_id) {
                        continue;
                    }
                    match writer::write_result(doc, &record.tool_id, &body, writer) {
                        Ok(edit) => edits.push(edit),
                        Err(flemma_ast::AstError::UnknownToolResult { .. }) => {}
                        Err(error) => return Err(TranscriptError::Edit(error).into()),
                    }
                }
                Ok(edits)
            })
            .await?;
        }
        for record in &gone {
            if let Err(error) = locked.remove(&record.tool_id) {
                tracing::warn!(id = %record.tool_id, %error, "call claim not removed");
            }
        }
        if any_torn {
            // What is left unreadable is a claim on a call already answered (its removal was
            // lost in the crash, its bytes too): nothing to answer, so it goes.
            locked.drop_torn(&in_progress_ids);
        }
        drop(locked);
        Ok(self.report_lost(lost, &torn))
    }

    /// The calls of `in_progress` (id, tool) not running here whose claim file does not read
    /// as a claim ([`Locked::torn`](table::Locked::torn)), as records of a gone owner.
    fn torn_claims(
        &self,
        locked: &table::Locked,
        in_progress: Vec<(String, String)>,
    ) -> Vec<ClaimRecord> {
        in_progress
            .into_iter()
            .filter(|(id, _)| !self.is_running(id) && locked.torn(id))
            .map(|(tool_id, tool)| ClaimRecord {
                tool_id,
                tool,
                owner: None,
                host: 0,
                claimed_at: 0.0,
            })
            .collect()
    }

    /// Tells of the calls answered with [`msg::CALL_LOST`] (a warning and a completion each).
    fn report_lost(&self, lost: Vec<ClaimRecord>, torn: &[ClaimRecord]) -> Vec<Completed> {
        let mut completed = Vec::with_capacity(lost.len());
        for record in lost {
            let id = ToolUseId::sanitized(&record.tool_id);
            let tool = ToolName::read(record.tool.as_str())
                .unwrap_or_else(|_| ToolName::sanitized(&record.tool));
            let host = if torn.iter().any(|t| t.tool_id == record.tool_id) {
                "its host (its claim left unreadable, as by a crash)".to_owned()
            } else {
                format!(
                    "its host (pid {})",
                    record
                        .owner
                        .map_or_else(|| "?".to_owned(), |o| o.pid.to_string())
                )
            };
            self.emit(Event::Warning(format!(
                "{tool} ({id}): {host} ended before it completed; answered with an error"
            )));
            self.emit(Event::ToolCompleted {
                id: id.clone(),
                tool: tool.clone(),
                success: false,
            });
            completed.push(Completed {
                id,
                tool,
                success: false,
            });
        }
        completed
    }

    /// The calls of this conversation that hosts have claimed (read only): those running in
    /// a live host, and those whose host died before it finished them (the next cycle answers
    /// these with an error).
    ///
    /// # Errors
    ///
    /// As [`Executor::cycle`], when the options do not evaluate.
    pub async fn claims(&self) -> Result<Vec<CallClaim>, ExecutorError> {
        let settings = self.settings().await?;
        Ok(claims_under(&settings).await)
    }

    /// [`claims`](Self::claims) under the options of `doc`, a parse of the conversation the
    /// caller already holds: the conversation is not read again (for a large transcript, a
    /// second read and parse would double the time and the memory of a check).
    ///
    /// # Errors
    ///
    /// As [`claims`](Self::claims), when the options do not evaluate.
    pub async fn claims_in(&self, doc: &Document) -> Result<Vec<CallClaim>, ExecutorError> {
        let settings = self.settings_in(doc)?;
        Ok(claims_under(&settings).await)
    }
}

/// The claims of the table `settings` name, in the order of their ids.
async fn claims_under(settings: &Settings) -> Vec<CallClaim> {
    let mut claims: Vec<CallClaim> = settings
        .claims
        .peek()
        .await
        .into_iter()
        .map(|r| CallClaim {
            live: r.is_live(),
            id: ToolUseId::sanitized(&r.tool_id),
            tool: ToolName::read(r.tool.as_str()).unwrap_or_else(|_| ToolName::sanitized(&r.tool)),
            pid: r.owner.map(|o| o.pid),
        })
        .collect();
    claims.sort_by(|a, b| a.id.as_str().cmp(b.id.as_str()));
    claims
}

//! Running the hooks of one event: in priority order, each guarded (an error or a panic is a
//! warning and no opinion), their answers combined.

use std::future::Future;
use std::panic::AssertUnwindSafe;

use futures_util::FutureExt as _;
use serde_json::Value;

use super::registration::{HookRegistration, Hooks};
use flemma_core::hooks::HookError;
use flemma_core::hooks::HookEvent;
use flemma_core::hooks::{
    NotificationInput, Permission, PostCompactInput, PostToolUseInput, PreCompactInput,
    PreToolUseInput, SessionInput, StopInput, SubagentInput, UserPromptSubmitInput,
};

/// What the `PreToolUse` hooks made of a call.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct PreOutcome {
    /// The input the call runs with, when a hook rewrote it.
    pub input: Option<Value>,
    /// The binding decision (deny over ask over allow), the hook that made it and its
    /// reason.
    pub decision: Option<(Permission, String, Option<String>)>,
    /// Text for the model, by hook.
    pub context: Vec<(String, String)>,
    /// What to show the user: hooks that failed, hooks' notices.
    pub warnings: Vec<String>,
}

/// What the `PostToolUse` / `PostToolUseFailure` hooks made of a result.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PostOutcome {
    /// The result's text, as the hooks left it.
    pub result: String,
    /// Whether it is an error, as the hooks left it.
    pub is_error: bool,
    /// Whether a hook changed the text or the error flag.
    pub changed: bool,
    /// Text for the model, by hook.
    pub context: Vec<(String, String)>,
    /// What to show the user.
    pub warnings: Vec<String>,
}

/// What the `UserPromptSubmit` hooks made of a send.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PromptOutcome {
    /// The first hook that blocked the send, and why.
    pub block: Option<(String, String)>,
    /// Text for the model, by hook.
    pub context: Vec<(String, String)>,
    /// What to show the user.
    pub warnings: Vec<String>,
}

/// What the `Stop` hooks made of going idle.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct StopOutcome {
    /// The first hook that kept the session going, and the reason for the model.
    pub continue_with: Option<(String, String)>,
    /// What to show the user.
    pub warnings: Vec<String>,
}

/// What the `PreCompact` hooks made of a compaction.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PreCompactOutcome {
    /// The first hook that cancelled it, and why.
    pub cancel: Option<(String, String)>,
    /// Instructions for the summary, by hook.
    pub instructions: Vec<(String, String)>,
    /// What to show the user.
    pub warnings: Vec<String>,
}

/// Some hooks of a set (no copies of the hooks: their indices in the snapshot).
struct Selected {
    set: std::sync::Arc<Vec<HookRegistration>>,
    at: Vec<usize>,
}

impl Selected {
    fn is_empty(&self) -> bool {
        self.at.is_empty()
    }

    fn iter(&self) -> impl Iterator<Item = &HookRegistration> {
        self.at.iter().map(|&i| &self.set[i])
    }
}

/// Awaits one hook, turning its error or panic into the warning it shows as.
async fn guarded<T>(
    event: HookEvent,
    hook: &HookRegistration,
    run: impl Future<Output = Result<T, HookError>>,
) -> Result<T, String> {
    use tracing::Instrument as _;
    let span = crate::telemetry::hook(event.as_str(), &hook.name);
    let outcome = AssertUnwindSafe(run)
        .catch_unwind()
        .instrument(span.clone())
        .await;
    match outcome {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(error)) => {
            crate::telemetry::record_error(&span, "hook_error");
            Err(format!("hook '{}' error: {}", hook.name, error.report()))
        }
        Err(_) => {
            crate::telemetry::record_error(&span, "hook_panic");
            Err(format!("hook '{}' panicked", hook.name))
        }
    }
}

fn notice(warnings: &mut Vec<String>, hook: &HookRegistration, notice: Option<String>) {
    if let Some(text) = notice.filter(|t| !t.trim().is_empty()) {
        warnings.push(format!("hook '{}': {text}", hook.name));
    }
}

fn context(into: &mut Vec<(String, String)>, hook: &HookRegistration, text: Option<String>) {
    if let Some(text) = text.filter(|t| !t.trim().is_empty()) {
        into.push((hook.name.clone(), text));
    }
}

impl Hooks {
    /// The hooks of `event` (for tool events, those whose matcher matches `tool`), in order:
    /// the set as it is now, and which of its hooks to run.
    fn of(&self, event: HookEvent, tool: Option<&str>) -> Selected {
        let set = self.snapshot();
        let at = set
            .iter()
            .enumerate()
            .filter(|(_, h)| h.listens_to(event) && tool.is_none_or(|t| h.matches_tool(t)))
            .map(|(i, _)| i)
            .collect();
        Selected { set, at }
    }

    /// Runs the `PreToolUse` hooks of a call. Each sees the input as the hooks before it left
    /// it; an `updated_input` that is not a JSON object is refused (a warning).
    pub async fn pre_tool_use(&self, event: &PreToolUseInput) -> PreOutcome {
        let mut outcome = PreOutcome::default();
        let hooks = self.of(HookEvent::PreToolUse, Some(event.tool.as_str()));
        if hooks.is_empty() {
            return outcome;
        }
        // The event as the hooks so far left it: a copy only once a hook rewrote the input.
        let mut rewritten: Option<PreToolUseInput> = None;
        for hook in hooks.iter() {
            let current = rewritten.as_ref().unwrap_or(event);
            let answer =
                match guarded(HookEvent::PreToolUse, hook, hook.hook.pre_tool_use(current)).await {
                    Ok(answer) => answer,
                    Err(warning) => {
                        outcome.warnings.push(warning);
                        continue;
                    }
                };
            notice(&mut outcome.warnings, hook, answer.notice);
            match answer.updated_input {
                Some(input @ Value::Object(_)) if input != current.input => {
                    let mut next = current.clone();
                    next.input = input.clone();
                    rewritten = Some(next);
                    outcome.input = Some(input);
                }
                Some(Value::Object(_)) | None => {}
                Some(_) => outcome.warnings.push(format!(
                    "hook '{}': updatedInput is not a JSON object; the input is unchanged",
                    hook.name
                )),
            }
            if let Some(permission) = answer.permission {
                let stronger = outcome
                    .decision
                    .as_ref()
                    .is_none_or(|(had, _, _)| strength(permission) > strength(*had));
                if stronger {
                    outcome.decision = Some((permission, hook.name.clone(), answer.reason));
                }
            }
            context(&mut outcome.context, hook, answer.context);
        }
        outcome
    }

    /// Runs the `PostToolUse` hooks (or `PostToolUseFailure`, when the result is an error)
    /// of a finished call. Each sees the result as the hooks before it left it.
    pub async fn post_tool_use(&self, event: &PostToolUseInput) -> PostOutcome {
        let kind = if event.is_error {
            HookEvent::PostToolUseFailure
        } else {
            HookEvent::PostToolUse
        };
        let mut outcome = PostOutcome {
            result: event.result.clone(),
            is_error: event.is_error,
            ..PostOutcome::default()
        };
        let hooks = self.of(kind, Some(event.tool.as_str()));
        if hooks.is_empty() {
            return outcome;
        }
        let mut current = event.clone();
        for hook in hooks.iter() {
            let run = if kind == HookEvent::PostToolUseFailure {
                hook.hook.post_tool_use_failure(&current)
            } else {
                hook.hook.post_tool_use(&current)
            };
            let answer = match guarded(kind, hook, run).await {
                Ok(answer) => answer,
                Err(warning) => {
                    outcome.warnings.push(warning);
                    continue;
                }
            };
            notice(&mut outcome.warnings, hook, answer.notice);
            if let Some(text) = answer.replace {
                current.result = text;
            }
            if let Some(text) = answer.append.filter(|t| !t.is_empty()) {
                if !current.result.is_empty() && !current.result.ends_with('\n') {
                    current.result.push('\n');
                }
                current.result.push_str(&text);
            }
            if let Some(is_error) = answer.is_error {
                current.is_error = is_error;
            }
            context(&mut outcome.context, hook, answer.context);
        }
        outcome.changed = current.result != event.result || current.is_error != event.is_error;
        outcome.result = current.result;
        outcome.is_error = current.is_error;
        outcome
    }

    /// Runs the `UserPromptSubmit` hooks; the first block stops the others.
    pub async fn user_prompt_submit(&self, event: &UserPromptSubmitInput) -> PromptOutcome {
        let mut outcome = PromptOutcome::default();
        for hook in self.of(HookEvent::UserPromptSubmit, None).iter() {
            let answer = match guarded(
                HookEvent::UserPromptSubmit,
                hook,
                hook.hook.user_prompt_submit(event),
            )
            .await
            {
                Ok(answer) => answer,
                Err(warning) => {
                    outcome.warnings.push(warning);
                    continue;
                }
            };
            notice(&mut outcome.warnings, hook, answer.notice);
            if let Some(reason) = answer.block {
                outcome.block = Some((hook.name.clone(), reason));
                break;
            }
            context(&mut outcome.context, hook, answer.context);
        }
        outcome
    }

    /// Runs the `Stop` hooks; the first that keeps the session going stops the others.
    pub async fn stop(&self, event: &StopInput) -> StopOutcome {
        let mut outcome = StopOutcome::default();
        for hook in self.of(HookEvent::Stop, None).iter() {
            let answer = match guarded(HookEvent::Stop, hook, hook.hook.stop(event)).await {
                Ok(answer) => answer,
                Err(warning) => {
                    outcome.warnings.push(warning);
                    continue;
                }
            };
            notice(&mut outcome.warnings, hook, answer.notice);
            if let Some(reason) = answer.continue_with.filter(|r| !r.trim().is_empty()) {
                outcome.continue_with = Some((hook.name.clone(), reason));
                break;
            }
        }
        outcome
    }

    /// Runs the `SessionStart` (`start`) or `SessionEnd` hooks; returns their warnings.
    pub async fn session(&self, start: bool, event: &SessionInput) -> Vec<String> {
        let kind = if start {
            HookEvent::SessionStart
        } else {
            HookEvent::SessionEnd
        };
        let mut warnings = Vec::new();
        for hook in self.of(kind, None).iter() {
            let run = if start {
                hook.hook.session_start(event)
            } else {
                hook.hook.session_end(event)
            };
            if let Err(warning) = guarded(kind, hook, run).await {
                warnings.push(warning);
            }
        }
        warnings
    }

    /// Runs the `SubagentStart` (`start`) or `SubagentStop` hooks; returns their warnings.
    pub async fn subagent(&self, start: bool, event: &SubagentInput) -> Vec<String> {
        let kind = if start {
            HookEvent::SubagentStart
        } else {
            HookEvent::SubagentStop
        };
        let mut warnings = Vec::new();
        for hook in self.of(kind, None).iter() {
            let run = if start {
                hook.hook.subagent_start(event)
            } else {
                hook.hook.subagent_stop(event)
            };
            if let Err(warning) = guarded(kind, hook, run).await {
                warnings.push(warning);
            }
        }
        warnings
    }

    /// Runs the `PreCompact` hooks whose matcher matches the trigger (`auto`, `manual`, as
    /// Claude Code's do); the first cancel stops the others.
    pub async fn pre_compact(&self, event: &PreCompactInput) -> PreCompactOutcome {
        let mut outcome = PreCompactOutcome::default();
        let trigger = Some(event.trigger.as_str());
        for hook in self.of(HookEvent::PreCompact, trigger).iter() {
            let answer =
                match guarded(HookEvent::PreCompact, hook, hook.hook.pre_compact(event)).await {
                    Ok(answer) => answer,
                    Err(warning) => {
                        outcome.warnings.push(warning);
                        continue;
                    }
                };
            notice(&mut outcome.warnings, hook, answer.notice);
            if let Some(reason) = answer.cancel {
                outcome.cancel = Some((hook.name.clone(), reason));
                break;
            }
            context(&mut outcome.instructions, hook, answer.instructions);
        }
        outcome
    }

    /// Runs the `PostCompact` hooks whose matcher matches the trigger; returns their
    /// warnings.
    pub async fn post_compact(&self, event: &PostCompactInput) -> Vec<String> {
        let mut warnings = Vec::new();
        let trigger = Some(event.trigger.as_str());
        for hook in self.of(HookEvent::PostCompact, trigger).iter() {
            if let Err(warning) =
                guarded(HookEvent::PostCompact, hook, hook.hook.post_compact(event)).await
            {
                warnings.push(warning);
            }
        }
        warnings
    }

    /// Runs the `Notification` hooks (those whose matcher matches the call's tool, when it is
    /// about one); returns their warnings.
    pub async fn notification(&self, event: &NotificationInput) -> Vec<String> {
        let tool = event.tool.as_ref().map(|(t, _)| t.as_str());
        let mut warnings = Vec::new();
        for hook in self.of(HookEvent::Notification, tool).iter() {
            if let Err(warning) =
                guarded(HookEvent::Notification, hook, hook.hook.notification(event)).await
            {
                warnings.push(warning);
            }
        }
        warnings
    }
}

/// How strongly a permission binds when hooks disagree: deny over ask over allow.
fn strength(permission: Permission) -> u8 {
    match permission {
        Permission::Deny => 2,
        Permission::Ask => 1,
        Permission::Allow => 0,
    }
}

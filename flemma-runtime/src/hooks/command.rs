//! Command hooks: a shell command given the event as JSON on standard input, answering by
//! its exit code and (optionally) JSON on standard output, in Claude Code's contract.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Map, Value, json};

use super::claude::{claude_input, claude_tool_name, native_input};
use super::config::Compat;
use flemma_core::hooks::Hook;
use flemma_core::hooks::HookError;
use flemma_core::hooks::{
    HookContext, HookEvent, NotificationInput, Permission, PostCompactInput, PostToolUseAnswer,
    PostToolUseInput, PreCompactAnswer, PreCompactInput, PreToolUseAnswer, PreToolUseInput,
    PromptAnswer, SessionInput, StopAnswer, StopInput, SubagentInput, UserPromptSubmitInput,
};

/// A command hook's time limit when its table sets none (Claude Code's default).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// The most of each output stream a hook's answer is read from; the rest is drained.
const OUTPUT_LIMIT: usize = 1 << 20;

/// A shell command run at an event (`[[hooks.PreToolUse]] command = "…"`).
///
/// It runs with `bash -c` (`sh -c` where there is no bash) outside the sandbox, as the
/// host's user, in the conversation's directory, with the host's environment without its
/// credentials (the policy `bash` gets, [`flemma_config::EnvPolicy`]'s default: a hook reads
/// the model's input and may echo it back), plus `FLEMMA_PROJECT_DIR` (and
/// `CLAUDE_PROJECT_DIR` under [`Compat::Claude`]), in a process
/// group of its own that is killed when the time limit passes. Standard input holds the
/// event as JSON: `session_id`, `transcript_path`, `cwd`, `hook_event_name` and the event's
/// fields (`tool_name`, `tool_input`, `tool_use_id`, `tool_response`, `error`, `prompt`,
/// `stop_hook_active`, `message`, …).
///
/// Its answer: exit 0 is fine (standard output read as JSON when it is an object; plain text
/// from a `UserPromptSubmit` hook is context for the model); exit 2 blocks, with standard
/// error as the reason (a `PreToolUse` denial, a blocked prompt, a `Stop` that continues, a
/// note for the model after a call); any other exit is a warning. The JSON answer: `continue`
/// / `stopReason`, `systemMessage`, `decision: "block"` with `reason`, and
/// `hookSpecificOutput` with `permissionDecision` (`allow`/`deny`/`ask`),
/// `permissionDecisionReason`, `updatedInput`, `additionalContext`, and for
/// `PostToolUse` flemma's `updatedToolOutput`, `appendToolOutput` and `isError`. A
/// `PreCompact` hook gets `trigger`, `custom_instructions`, `messages` and `tokens`; exit 2,
/// `continue: false` or `decision: "block"` cancels the compaction, and its `additionalContext`
/// (or plain standard output) is added to the summary's instructions. A `PostCompact` hook gets
/// the same and `summary_tokens` and `compact_summary`.
#[derive(Debug, Clone)]
pub struct CommandHook {
    command: String,
    timeout: Duration,
    compat: Compat,
}

impl CommandHook {
    /// `command`, with the [`DEFAULT_TIMEOUT`], in flemma's vocabulary.
    pub fn new(command: impl Into<String>) -> Self {
        Self {
            command: command.into(),
            timeout: DEFAULT_TIMEOUT,
            compat: Compat::Native,
        }
    }

    /// Its time limit.
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The vocabulary its input and answers are in.
    #[must_use]
    pub fn compat(mut self, compat: Compat) -> Self {
        self.compat = compat;
        self
    }

    /// The command.
    pub fn command(&self) -> &str {
        &self.command
    }

    fn claude(&self) -> bool {
        self.compat == Compat::Claude
    }

    /// The common fields of every event's input.
    fn base(event: HookEvent, context: &HookContext) -> Map<String, Value> {
        let mut input = Map::new();
        input.insert("session_id".into(), context.session_id.clone().into());
        input.insert(
            "transcript_path".into(),
            context
                .transcript_path
                .as_ref()
                .map_or(Value::Null, |p| p.to_string_lossy().into_owned().into()),
        );
        input.insert(
            "cwd".into(),
            context.cwd.to_string_lossy().into_owned().into(),
        );
        input.insert("permission_mode".into(), "default".into());
        input.insert("hook_event_name".into(), event.as_str().into());
        input
    }

    /// The input of a tool event: the common fields, the tool's name and input (in the
    /// hook's vocabulary) and the call's id.
    fn tool_event(
        &self,
        event: HookEvent,
        context: &HookContext,
        tool: &str,
        id: &str,
        args: &Value,
    ) -> Map<String, Value> {
        let mut input = Self::base(event, context);
        let (name, args) = if self.claude() {
            (
                claude_tool_name(tool),
                claude_input(tool, args, &context.cwd),
            )
        } else {
            (tool.to_owned(), args.clone())
        };
        input.insert("tool_name".into(), name.into());
        input.insert("tool_input".into(), args);
        input.insert("tool_use_id".into(), id.into());
        input
    }

    /// Runs the command with `input` on standard input.
    async fn call(&self, input: Map<String, Value>, cwd: &Path) -> Result<Ran, HookError> {
        let text = serde_json::to_vec(&Value::Object(input))
            .map_err(|e| HookError::with_source("cannot encode the hook's input", e))?;
        run(&self.command, &text, cwd, self.timeout, self.claude()).await
    }
}

/// What a command did.
struct Ran {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// The JSON answer of a command that exited 0, when it wrote one.
#[derive(Default)]
struct Answer {
    json: Map<String, Value>,
    /// Standard output when it is not a JSON object.
    text: String,
}

impl Answer {
    fn str(&self, key: &str) -> Option<String> {
        self.json
            .get(key)
            .and_then(Value::as_str)
            .map(str::to_owned)
    }

    fn specific(&self, key: &str) -> Option<&Value> {
        self.json.get("hookSpecificOutput").and_then(|o| o.get(key))
    }

    fn specific_str(&self, key: &str) -> Option<String> {
        self.specific(key)
            .and_then(Value::as_str)
            .map(str::to_owned)
    }

    /// `continue: false`, and the reason (`stopReason`).
    fn stops(&self) -> Option<String> {
        (self.json.get("continue") == Some(&Value::Bool(false))).then(|| {
            self.str("stopReason")
                .unwrap_or_else(|| "a hook stopped processing".to_owned())
        })
    }

    fn blocks(&self) -> bool {
        self.str("decision").as_deref() == Some("block")
    }

    fn notice(&self) -> Option<String> {
        self.str("systemMessage")
    }
}

impl Ran {
    /// The answer of exit 0, or `Err(reason)` for exit 2; other exits are errors.
    fn answer(self) -> Result<Result<Answer, String>, HookError> {
        match self.code {
            Some(0) => {
                let trimmed = self.stdout.trim();
                if trimmed.starts_with('{') {
                    let json: Value = serde_json::from_str(trimmed).map_err(|e| {
                        HookError::with_source("its standard output is not valid JSON", e)
                    })?;
                    let Value::Object(json) = json else {
                        return Err(HookError::new("its JSON answer is not an object"));
                    };
                    Ok(Ok(Answer {
                        json,
                        text: String::new(),
                    }))
                } else {
                    Ok(Ok(Answer {
                        json: Map::new(),
                        text: trimmed.to_owned(),
                    }))
                }
            }
            Some(2) => {
                let reason = self.stderr.trim();
                Ok(Err(if reason.is_empty() {
                    "blocked by a hook (exit 2)".to_owned()
                } else {
                    reason.to_owned()
                }))
            }
            Some(code) => Err(HookError::new(format!(
                "exited with status {code}{}",
                stderr_suffix(&self.stderr)
            ))),
            None => Err(HookError::new(format!(
                "was killed by a signal{}",
                stderr_suffix(&self.stderr)
            ))),
        }
    }
}

fn stderr_suffix(stderr: &str) -> String {
    let stderr = stderr.trim();
    if stderr.is_empty() {
        String::new()
    } else {
        format!(": {stderr}")
    }
}

#[async_trait]
impl Hook for CommandHook {
    async fn pre_tool_use(&self, event: &PreToolUseInput) -> Result<PreToolUseAnswer, HookError> {
        let cwd = &event.context.cwd;
        let input = self.tool_event(
            HookEvent::PreToolUse,
            &event.context,
            event.tool.as_str(),
            event.id.as_str(),
            &event.input,
        );
        let answer = match self.call(input, cwd).await?.answer()? {
            Ok(answer) => answer,
            Err(reason) => return Ok(PreToolUseAnswer::deny(reason)),
        };
        let mut out = PreToolUseAnswer::pass();
        out.notice = answer.notice();
        if let Some(reason) = answer.stops() {
            // `continue: false`: nothing more happens for this call.
            out.permission = Some(Permission::Deny);
            out.reason = Some(reason);
            return Ok(out);
        }
        let decision = answer.specific_str("permissionDecision");
        let reason = answer
            .specific_str("permissionDecisionReason")
            .or_else(|| answer.str("reason"));
        out.permission = match decision.as_deref() {
            Some("allow") => Some(Permission::Allow),
            Some("deny") => Some(Permission::Deny),
            Some("ask") => Some(Permission::Ask),
            Some(other) => {
                return Err(HookError::new(format!(
                    "unknown permissionDecision `{other}`"
                )));
            }
            // The older top-level form.
            None => match answer.str("decision").as_deref() {
                Some("approve") => Some(Permission::Allow),
                Some("block") => Some(Permission::Deny),
                _ => None,
            },
        };
        out.reason = reason;
        out.updated_input = answer.specific("updatedInput").map(|updated| {
            if self.claude() {
                native_input(event.tool.as_str(), updated, &event.input, cwd)
            } else {
                updated.clone()
            }
        });
        out.context = answer.specific_str("additionalContext");
        Ok(out)
    }

    async fn post_tool_use(
        &self,
        event: &PostToolUseInput,
    ) -> Result<PostToolUseAnswer, HookError> {
        self.post(HookEvent::PostToolUse, event).await
    }

    async fn post_tool_use_failure(
        &self,
        event: &PostToolUseInput,
    ) -> Result<PostToolUseAnswer, HookError> {
        self.post(HookEvent::PostToolUseFailure, event).await
    }

    async fn user_prompt_submit(
        &self,
        event: &UserPromptSubmitInput,
    ) -> Result<PromptAnswer, HookError> {
        let mut input = Self::base(HookEvent::UserPromptSubmit, &event.context);
        input.insert("prompt".into(), event.prompt.clone().into());
        let answer = match self.call(input, &event.context.cwd).await?.answer()? {
            Ok(answer) => answer,
            Err(reason) => return Ok(PromptAnswer::block(reason)),
        };
        let mut out = PromptAnswer::pass();
        out.notice = answer.notice();
        if let Some(reason) = answer.stops() {
            out.block = Some(reason);
            return Ok(out);
        }
        if answer.blocks() {
            out.block = Some(
                answer
                    .str("reason")
                    .unwrap_or_else(|| "blocked by a hook".to_owned()),
            );
            return Ok(out);
        }
        out.context = answer
            .specific_str("additionalContext")
            .or_else(|| (!answer.text.is_empty()).then(|| answer.text.clone()));
        Ok(out)
    }

    async fn stop(&self, event: &StopInput) -> Result<StopAnswer, HookError> {
        let mut input = Self::base(HookEvent::Stop, &event.context);
        input.insert("stop_hook_active".into(), event.stop_hook_active.into());
        input.insert(
            "last_assistant_message".into(),
            event.last_message.clone().map_or(Value::Null, Value::from),
        );
        let answer = match self.call(input, &event.context.cwd).await?.answer()? {
            Ok(answer) => answer,
            Err(reason) => return Ok(StopAnswer::continue_with(reason)),
        };
        let mut out = StopAnswer::pass();
        out.notice = answer.notice();
        if answer.stops().is_none() && answer.blocks() {
            out.continue_with = Some(answer.str("reason").ok_or_else(|| {
                HookError::new("`decision: \"block\"` without a `reason` for the model")
            })?);
        }
        Ok(out)
    }

    async fn session_start(&self, event: &SessionInput) -> Result<(), HookError> {
        self.session(HookEvent::SessionStart, "source", event).await
    }

    async fn session_end(&self, event: &SessionInput) -> Result<(), HookError> {
        self.session(HookEvent::SessionEnd, "reason", event).await
    }

    async fn subagent_start(&self, event: &SubagentInput) -> Result<(), HookError> {
        let mut input = Self::base(HookEvent::SubagentStart, &event.context);
        input.insert("agent_id".into(), event.agent_id.as_str().into());
        input.insert("agent_type".into(), event.agent_type.clone().into());
        self.quiet(input, &event.context.cwd).await
    }

    async fn subagent_stop(&self, event: &SubagentInput) -> Result<(), HookError> {
        let mut input = Self::base(HookEvent::SubagentStop, &event.context);
        input.insert("stop_hook_active".into(), false.into());
        input.insert("agent_id".into(), event.agent_id.as_str().into());
        input.insert("agent_type".into(), event.agent_type.clone().into());
        input.insert(
            "agent_transcript_path".into(),
            event
                .agent_transcript_path
                .as_ref()
                .map_or(Value::Null, |p| p.to_string_lossy().into_owned().into()),
        );
        self.quiet(input, &event.context.cwd).await
    }

    async fn pre_compact(&self, event: &PreCompactInput) -> Result<PreCompactAnswer, HookError> {
        let mut input = Self::base(HookEvent::PreCompact, &event.context);
        input.insert("trigger".into(), event.trigger.as_str().into());
        input.insert(
            "custom_instructions".into(),
            event.custom_instructions.clone().unwrap_or_default().into(),
        );
        input.insert("messages".into(), event.messages.into());
        input.insert("tokens".into(), event.tokens.into());
        let answer = match self.call(input, &event.context.cwd).await?.answer()? {
            Ok(answer) => answer,
            Err(reason) => return Ok(PreCompactAnswer::cancel(reason)),
        };
        let mut out = PreCompactAnswer::pass();
        out.notice = answer.notice();
        if let Some(reason) = answer.stops() {
            out.cancel = Some(reason);
            return Ok(out);
        }
        if answer.blocks() {
            out.cancel = Some(
                answer
                    .str("reason")
                    .unwrap_or_else(|| "cancelled by a hook".to_owned()),
            );
            return Ok(out);
        }
        out.instructions = answer
            .specific_str("additionalContext")
            .or_else(|| (!answer.text.is_empty()).then(|| answer.text.clone()));
        Ok(out)
    }

    async fn post_compact(&self, event: &PostCompactInput) -> Result<(), HookError> {
        let mut input = Self::base(HookEvent::PostCompact, &event.context);
        input.insert("trigger".into(), event.trigger.as_str().into());
        input.insert("messages".into(), event.messages.into());
        input.insert("tokens".into(), event.tokens.into());
        input.insert("summary_tokens".into(), event.summary_tokens.into());
        input.insert("compact_summary".into(), event.summary.clone().into());
        self.quiet(input, &event.context.cwd).await
    }

    async fn notification(&self, event: &NotificationInput) -> Result<(), HookError> {
        let mut input = Self::base(HookEvent::Notification, &event.context);
        input.insert("message".into(), event.message.clone().into());
        input.insert("notification_type".into(), event.kind.clone().into());
        if let Some((tool, id)) = &event.tool {
            let name = if self.claude() {
                claude_tool_name(tool.as_str())
            } else {
                tool.to_string()
            };
            input.insert("tool_name".into(), name.into());
            input.insert("tool_use_id".into(), id.as_str().into());
        }
        self.quiet(input, &event.context.cwd).await
    }
}

impl CommandHook {
    async fn post(
        &self,
        kind: HookEvent,
        event: &PostToolUseInput,
    ) -> Result<PostToolUseAnswer, HookError> {
        let cwd = &event.context.cwd;
        let mut input = self.tool_event(
            kind,
            &event.context,
            event.tool.as_str(),
            event.id.as_str(),
            &event.input,
        );
        if kind == HookEvent::PostToolUseFailure {
            input.insert("error".into(), event.result.clone().into());
            input.insert("is_interrupt".into(), false.into());
        } else {
            input.insert("tool_response".into(), self.response(event, cwd));
        }
        let answer = match self.call(input, cwd).await?.answer()? {
            Ok(answer) => answer,
            // Exit 2 after a call: the call ran; the reason is for the model.
            Err(reason) => return Ok(PostToolUseAnswer::pass().with_context(reason)),
        };
        let mut out = PostToolUseAnswer::pass();
        out.notice = answer.notice();
        if let Some(reason) = answer.stops() {
            out.context = Some(reason);
            return Ok(out);
        }
        let mut context = Vec::new();
        if answer.blocks() {
            context.extend(answer.str("reason"));
        }
        context.extend(answer.specific_str("additionalContext"));
        out.context = (!context.is_empty()).then(|| context.join("\n"));
        out.replace = answer.specific_str("updatedToolOutput").or_else(|| {
            answer
                .specific("updatedMCPToolOutput")
                .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
        });
        out.append = answer.specific_str("appendToolOutput");
        out.is_error = answer.specific("isError").and_then(Value::as_bool);
        Ok(out)
    }

    /// `tool_response`: the result's text, and for Claude Code hooks the fields its tools
    /// report (`Bash`: `stdout`, `stderr`, `interrupted`; file tools: `filePath`, `success`).
    fn response(&self, event: &PostToolUseInput, cwd: &Path) -> Value {
        let mut response = json!({
            "output": event.result,
            "is_error": event.is_error,
            "truncated": event.truncated,
        });
        if self.claude() {
            if event.tool == "bash" {
                response["stdout"] = event.result.clone().into();
                response["stderr"] = "".into();
                response["interrupted"] = false.into();
                response["isImage"] = false.into();
            }
            if let Some(path) = claude_input(event.tool.as_str(), &event.input, cwd)
                .get("file_path")
                .cloned()
            {
                response["filePath"] = path;
                response["success"] = (!event.is_error).into();
            }
        }
        response
    }

    async fn session(
        &self,
        kind: HookEvent,
        field: &str,
        event: &SessionInput,
    ) -> Result<(), HookError> {
        let mut input = Self::base(kind, &event.context);
        input.insert(field.into(), event.reason.clone().into());
        self.quiet(input, &event.context.cwd).await
    }

    /// Runs an event that has no answer: exit 2's reason is a warning like any failure.
    async fn quiet(&self, input: Map<String, Value>, cwd: &Path) -> Result<(), HookError> {
        match self.call(input, cwd).await?.answer()? {
            Ok(answer) => match answer.notice() {
                Some(notice) => Err(HookError::new(notice)),
                None => Ok(()),
            },
            Err(reason) => Err(HookError::new(reason)),
        }
    }
}

/// The shell command hooks run with.
fn shell() -> PathBuf {
    let bash = Path::new("/bin/bash");
    if bash.exists() {
        bash.to_owned()
    } else {
        PathBuf::from("/bin/sh")
    }
}

/// Runs `command` with `stdin`, killing its process group after `timeout`.
#[cfg(unix)]
async fn run(
    command: &str,
    stdin: &[u8],
    cwd: &Path,
    timeout: Duration,
    claude: bool,
) -> Result<Ran, HookError> {
    use tokio::io::AsyncWriteExt as _;

    let project = flemma_config::project_root(cwd);
    let mut cmd = tokio::process::Command::new(shell());
    cmd.arg("-c")
        .arg(command)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env_clear()
        .envs(flemma_config::EnvPolicy::default().apply_to_process())
        .env("FLEMMA_PROJECT_DIR", &project)
        .process_group(0)
        .kill_on_drop(true);
    if claude {
        cmd.env("CLAUDE_PROJECT_DIR", &project);
    }
    if cwd.is_dir() {
        cmd.current_dir(cwd);
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| HookError::with_source(format!("cannot start `{command}`"), e))?;
    let pid = child.id();
    let (Some(mut input), Some(mut out), Some(mut err)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err(HookError::new("the hook's pipes are missing"));
    };
    let write = async move {
        // A hook that does not read its input may close it early: not an error.
        let _ = input.write_all(stdin).await;
        drop(input);
    };
    let work = async {
        let ((), stdout, stderr, status) = tokio::join!(
            write,
            read_limited(&mut out),
            read_limited(&mut err),
            child.wait()
        );
        (stdout, stderr, status)
    };
    let Ok((stdout, stderr, status)) = tokio::time::timeout(timeout, work).await else {
        if let Some(pid) = pid.and_then(|p| rustix::process::Pid::from_raw(p.cast_signed())) {
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
        let _ = child.wait().await;
        return Err(HookError::new(format!(
            "timed out after {}s",
            timeout.as_secs_f64()
        )));
    };
    let status = status.map_err(|e| HookError::with_source("cannot wait for the hook", e))?;
    Ok(Ran {
        code: status.code(),
        stdout,
        stderr,
    })
}

#[cfg(not(unix))]
async fn run(
    _command: &str,
    _stdin: &[u8],
    _cwd: &Path,
    _timeout: Duration,
    _claude: bool,
) -> Result<Ran, HookError> {
    Err(HookError::new("command hooks need a Unix host"))
}

/// Reads a stream to its end, keeping the first [`OUTPUT_LIMIT`] bytes.
#[cfg(unix)]
async fn read_limited(stream: &mut (impl tokio::io::AsyncRead + Unpin)) -> String {
    use tokio::io::AsyncReadExt as _;
    let mut kept = Vec::new();
    let mut buf = vec![0u8; 8192];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = OUTPUT_LIMIT.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
        }
    }
    String::from_utf8_lossy(&kept).into_owned()
}

//! The children of a session: what an `agent` call runs ([`flemma_core::Delegate`]).
//!
//! A child is a session of its own over its own conversation (a file beside the parent's
//! store, named after the call's id, when the parent is a file), and never has more power
//! than its parent:
//! - its tools are its definition's within the parent conversation's tool set, `agent` only
//!   below the depth limit (a tool it lacks is `Unknown tool`, and never runs);
//! - its approval chain is the parent's registry's, under a first resolver that asks the
//!   parent's executor how the parent conversation would decide the same call: a call the
//!   parent would deny is denied, one it would ask about is asked about, and only one it would
//!   run is left to the child's own chain (so the child's frontmatter can only narrow);
//! - its hooks are the parent's; its pending calls go to the parent's approver, the preview
//!   naming the agent;
//! - its options below the frontmatter and its sandbox backends are the parent's, its turns at
//!   most the parent's.

use std::path::PathBuf;
use std::sync::{Arc, Weak};
use std::time::Duration;

use async_trait::async_trait;
use flemma_approval::{ApprovalContext, Decision, Resolver, ResolverError, ToolCall, Verdict};
use flemma_ast::Role;
use flemma_ast::escape::{escape_user, unescape_assistant};
use flemma_config::{Config, Layer};
use flemma_core::{
    Answer, Approver, Delegate, DelegateRequest, ExecutionContext, PendingCall, ToolOutput,
};
use flemma_ids::ToolName;

use super::{Inner, SessionBuilder, SessionEvent, Stop};
use crate::agents::{AgentDefinition, PARENT_RESOLVER, Subagents};
use crate::conversation::{Conversation, FileConversation, MemoryConversation};
use crate::messages as msg;
use crate::{Executor, ToolRegistry};
use flemma_ids::error_chain;

/// Above every other resolver, so that a parent's "ask" binds a child's "allow".
const PARENT_PRIORITY: i32 = i32::MAX;

/// How often a cancelled child is told again until its run returns (a run that had not
/// started when the first cancellation came would miss it).
const CANCEL_AGAIN: Duration = Duration::from_millis(50);

/// The delegate of one session: its children are sessions at `depth + 1`.
pub(super) struct SessionDelegate {
    pub(super) session: Weak<Inner>,
    pub(super) subagents: Subagents,
    pub(super) depth: u32,
}

impl std::fmt::Debug for SessionDelegate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionDelegate")
            .field("depth", &self.depth)
            .field("max_depth", &self.subagents.depth_limit())
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl Delegate for SessionDelegate {
    async fn delegate(&self, request: &DelegateRequest, ctx: &ExecutionContext) -> ToolOutput {
        let Some(parent) = self.session.upgrade() else {
            return ToolOutput::error(msg::AGENT_NEEDS_SESSION);
        };
        let Some(definition) = self.subagents.agents().get(&request.agent) else {
            let known: Vec<&str> = self
                .subagents
                .agents()
                .iter()
                .map(AgentDefinition::name)
                .collect();
            return ToolOutput::error(msg::unknown_agent(
                &request.agent,
                self.subagents.agents().did_you_mean(&request.agent),
                &known,
            ));
        };
        if self.depth >= self.subagents.depth_limit() {
            return ToolOutput::error(msg::agent_too_deep(self.subagents.depth_limit()));
        }
        match self.run_child(&parent, definition, request, ctx).await {
            Ok(output) => output,
            Err(error) => ToolOutput::error(msg::agent_stopped(definition.name(), &error, None)),
        }
    }
}

/// A child session ready to run, and what its result needs.
struct Child {
    session: super::Session,
    /// Its transcript's file, when it has one.
    path: Option<PathBuf>,
    max_turns: u64,
}

impl Child {
    /// The child's transcript now.
    async fn text(&self) -> Result<Arc<String>, String> {
        Ok(self
            .session
            .conversation()
            .snapshot()
            .await
            .map_err(|e| error_chain(&e))?
            .text)
    }
}

impl SessionDelegate {
    async fn run_child(
        &self,
        parent: &Arc<Inner>,
        definition: &AgentDefinition,
        request: &DelegateRequest,
        ctx: &ExecutionContext,
    ) -> Result<ToolOutput, String> {
        let Some(child) = self.child(parent, definition, request, ctx).await? else {
            return Ok(ToolOutput::error(msg::AGENT_NEEDS_SESSION));
        };
        forward_events(parent, &child.session, ctx, definition.name());
        let parent = super::Session {
            inner: Arc::clone(parent),
        };
        let event = crate::hooks::SubagentInput::new(
            parent.hook_context(),
            ctx.tool_id().clone(),
            definition.name(),
            child.path.clone(),
        );
        subagent_hooks(&parent, true, &event).await;
        let ended = drive(&child.session, ctx).await;
        subagent_hooks(&parent, false, &event).await;
        let Some(ended) = ended else {
            return Ok(ToolOutput::error(msg::ABORTED));
        };
        report(&child, definition.name(), ended, ctx).await
    }

    /// The child session of `definition` for the call `ctx` describes; `None` when the parent
    /// has no provider.
    async fn child(
        &self,
        parent: &Arc<Inner>,
        definition: &AgentDefinition,
        request: &DelegateRequest,
        ctx: &ExecutionContext,
    ) -> Result<Option<Child>, String> {
        let Some(provider) = parent.provider.clone() else {
            return Ok(None);
        };
        let executor = &parent.executor;
        let registry = executor.transcript().registry();
        let parent_tools: Vec<ToolName> = registry
            .tool_set(ctx.options())
            .iter()
            .map(|t| t.definition().name().clone())
            .collect();
        let child_depth = self.depth + 1;
        let may_delegate = child_depth < self.subagents.depth_limit();
        let narrowed = definition.narrow(&parent_tools, may_delegate);

        let tools = ToolRegistry::new();
        for name in &narrowed.tools {
            if let Some(tool) = registry.get(name.as_str()) {
                tools.register_arc(tool);
            }
        }
        let mut chain = (*registry.approval_chain()).clone();
        chain
            .register(
                PARENT_RESOLVER,
                PARENT_PRIORITY,
                ParentGate {
                    parent: Arc::downgrade(executor),
                },
            )
            .map_err(|e| e.to_string())?;

        let path = child_path(ctx, definition.name());
        let conversation =
            child_conversation(path.as_ref(), definition, &narrowed.tools, &request.prompt)?;
        let config = child_config(executor.transcript().config(), ctx)?;
        let mut builder = Executor::builder(conversation, tools)
            .config(config)
            .sandbox_backends(executor.transcript().sandbox_backends().clone())
            .chain(Arc::new(chain));
        if let Some(approver) = executor.approver() {
            builder = builder.approver(Arc::new(ChildApprover {
                parent: Arc::clone(approver),
                agent: definition.name().to_owned(),
            }));
        }
        let hooks = executor.hooks().await.map_err(|e| error_chain(&e))?;
        for hook in hooks.snapshot().iter() {
            builder = builder.hook(hook.clone());
        }
        let parent_turns = parent
            .max_turns
            .unwrap_or(ctx.options().tools.autopilot.max_turns);
        let max_turns = definition
            .max_turns()
            .map_or(parent_turns, |t| t.min(parent_turns));
        let mut session = SessionBuilder::new(builder, Some(provider))
            .max_turns(max_turns)
            .template_engine(Arc::clone(&parent.engine))
            .flush_interval(parent.flush_interval)
            .models(Arc::clone(&parent.models))
            .parent(self.session.clone(), definition.name());
        if may_delegate {
            session = session.nested_subagents(self.subagents.clone(), child_depth);
        }
        Ok(Some(Child {
            session: session.build(),
            path,
            max_turns,
        }))
    }
}

/// The parent's `SubagentStart` (`start`) or `SubagentStop` hooks, their warnings the parent's.
async fn subagent_hooks(parent: &super::Session, start: bool, event: &crate::hooks::SubagentInput) {
    let kind = if start {
        crate::hooks::HookEvent::SubagentStart
    } else {
        crate::hooks::HookEvent::SubagentStop
    };
    match parent.hooks().await {
        Ok(hooks) if hooks.has(kind) => {
            let warnings = hooks.subagent(start, event).await;
            parent.warn_all(warnings);
        }
        Ok(_) => {}
        Err(error) => parent.warn_all(vec![format!(
            "{kind} hooks not run: {}",
            error_chain(&error)
        )]),
    }
}

/// The child's events reach the parent's subscribers as they happen, tagged with the call.
fn forward_events(parent: &Inner, child: &super::Session, ctx: &ExecutionContext, agent: &str) {
    let subscribers = Arc::downgrade(&parent.subscribers);
    let (call, agent) = (ctx.tool_id().clone(), agent.to_owned());
    child
        .inner
        .subscribers
        .forward(Arc::new(move |event: &SessionEvent| {
            if let Some(subscribers) = subscribers.upgrade() {
                subscribers.emit(SessionEvent::Subagent {
                    call: call.clone(),
                    agent: agent.clone(),
                    event: Box::new(event.clone()),
                });
            }
        }));
}

/// Runs the child until it stops; `None` when the call was cancelled (the child is cancelled
/// too, and its run has returned).
async fn drive(
    child: &super::Session,
    ctx: &ExecutionContext,
) -> Option<Result<Stop, super::SessionError>> {
    let token = ctx.cancellation().clone();
    let run = child.run();
    tokio::pin!(run);
    let ended = tokio::select! {
        biased;
        () = token.cancelled() => None,
        ended = &mut run => Some(ended),
    };
    if ended.is_none() {
        loop {
            child.cancel_all();
            if tokio::time::timeout(CANCEL_AGAIN, &mut run).await.is_ok() {
                break;
            }
        }
    }
    ended
}

/// The call's result: the child's answer and its transcript, or why it has none.
async fn report(
    child: &Child,
    agent: &str,
    ended: Result<Stop, super::SessionError>,
    ctx: &ExecutionContext,
) -> Result<ToolOutput, String> {
    let shown = child.path.as_ref().map(|p| p.display().to_string());
    let stop = match ended {
        Ok(stop) => stop,
        Err(error) => {
            return Ok(ToolOutput::error(msg::agent_stopped(
                agent,
                &error_chain(&error),
                shown.as_deref(),
            )));
        }
    };
    let why = match stop {
        Stop::Finished => {
            let text = child.text().await?;
            let mut answer = final_answer(&text);
            if let Some(path) = &shown {
                answer.push_str("\n\n");
                answer.push_str(&msg::agent_transcript(path));
            }
            return Ok(ToolOutput::text(answer));
        }
        Stop::Cancelled => return Ok(ToolOutput::error(msg::ABORTED)),
        Stop::AwaitingApproval => {
            // The parent waits too, and the call runs again (resuming the child) once the
            // child's calls are decided in its transcript.
            if let Some(path) = &shown {
                let text = child.text().await?;
                ctx.defer(msg::agent_waits(
                    agent,
                    path,
                    &crate::actions::pending_calls(&flemma_ast::parse(&text)),
                ));
            }
            "a call waits for approval in its transcript".to_owned()
        }
        Stop::MaxTurns => format!("it reached its turn limit ({})", child.max_turns),
        Stop::Running => "its background jobs still run".to_owned(),
        Stop::PromptBlocked => "a hook blocked its prompt".to_owned(),
        Stop::AutopilotOff => "autopilot is off".to_owned(),
        Stop::Idle => "it had nothing to send".to_owned(),
        Stop::BudgetReached => "it reached a budget".to_owned(),
        other => format!("it stopped ({other:?})"),
    };
    Ok(ToolOutput::error(msg::agent_stopped(
        agent,
        &why,
        shown.as_deref(),
    )))
}

/// Where a child's transcript is, when the parent is a file: beside it, named after the
/// parent, the agent and the call (`notes.reviewer.toolu_01.chat`), so that paths in the
/// child resolve as in the parent (the same directory, project and relative paths).
fn child_path(ctx: &ExecutionContext, agent: &str) -> Option<PathBuf> {
    let parent = ctx.filename()?;
    let stem = parent.file_stem()?.to_string_lossy();
    let id = flemma_store::escape_id(ctx.tool_id().as_str());
    let name = format!("{stem}.{agent}.{id}.chat");
    let name = flemma_store::shorten(&name, flemma_store::MAX_FILE_NAME);
    Some(parent.with_file_name(name.as_ref()))
}

/// The child's options below its frontmatter: the host's, with what the parent conversation's
/// options say of approvals, the sandbox and the tools' environment set over them (so the
/// child's own frontmatter can only narrow the parent's values), and the parent's transcript
/// protected from the child's tools.
fn child_config(base: &Config, ctx: &ExecutionContext) -> Result<Config, String> {
    let parent = ctx.options();
    let mut config = base.clone();
    let inherited = [
        (
            "tools.auto_approve",
            serde_json::json!(parent.tools.auto_approve),
        ),
        (
            "tools.require_approval",
            parent.tools.require_approval.into(),
        ),
        (
            "tools.auto_approve_sandboxed",
            parent.tools.auto_approve_sandboxed.into(),
        ),
        (
            "sandbox",
            serde_json::to_value(&parent.sandbox).map_err(|e| e.to_string())?,
        ),
        (
            "tools.env",
            serde_json::to_value(&parent.tools.env).map_err(|e| e.to_string())?,
        ),
        // The command rules as the parent's frontmatter narrowed them.
        (
            "tools.bash.allow",
            serde_json::json!(parent.tools.bash.allow),
        ),
        ("tools.bash.ask", serde_json::json!(parent.tools.bash.ask)),
        ("tools.bash.deny", serde_json::json!(parent.tools.bash.deny)),
        (
            "tools.bash.claude_settings",
            parent.tools.bash.claude_settings.into(),
        ),
    ];
    for (path, value) in inherited {
        config.set(Layer::Runtime, path, value).map_err(|e| {
            format!(
                "the parent's `{path}` cannot be given to the child: {}",
                error_chain(&e)
            )
        })?;
    }
    if let Some(file) = ctx.filename() {
        config.protect_file(file);
    }
    Ok(config)
}

/// The child's conversation: the file at `path` (written first when it is not there, and
/// resumed as it is when it is), or one in memory.
fn child_conversation(
    path: Option<&PathBuf>,
    definition: &AgentDefinition,
    tools: &[ToolName],
    prompt: &str,
) -> Result<Arc<dyn Conversation>, String> {
    let text = first_text(definition, tools, prompt)?;
    let Some(path) = path else {
        return Ok(Arc::new(MemoryConversation::new(text)));
    };
    if !path.exists() {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
        flemma_store::write_atomic(path, text.as_bytes(), &flemma_store::NoBackup)
            .map_err(|e| error_chain(&e))?;
    }
    Ok(Arc::new(FileConversation::new(path.clone())))
}

/// A child's first text: a frontmatter with its tools (and model), so that the file run on
/// its own offers the same tools; the system prompt; the task. Neither the prompt (a project
/// file's) nor the task (the parent model's) is the user's: both are escaped, so they can
/// start no message, read no file and run no template.
fn first_text(
    definition: &AgentDefinition,
    tools: &[ToolName],
    prompt: &str,
) -> Result<String, String> {
    let mut options = serde_json::Map::new();
    options.insert(
        "tools".into(),
        serde_json::Value::Array(
            tools
                .iter()
                .map(|t| serde_json::Value::from(t.as_str()))
                .collect(),
        ),
    );
    if let Some(model) = definition.model() {
        options.insert("model".into(), model.into());
    }
    let frontmatter = serde_json::to_string(&serde_json::json!({ "flemma": options }))
        .map_err(|e| e.to_string())?;
    let mut text = format!("```json\n{frontmatter}\n```\n");
    let system = definition.prompt().trim_end();
    if !system.is_empty() {
        text.push_str("@System:\n");
        text.push_str(&escape_user(system));
        text.push_str("\n\n");
    }
    text.push_str("@You:\n");
    text.push_str(&escape_user(prompt.trim_end()));
    text.push('\n');
    Ok(text)
}

/// The text of the last `@Assistant:` message, as the model wrote it.
fn final_answer(text: &str) -> String {
    let document = flemma_ast::parse(text);
    let Some(last) = document
        .messages
        .iter()
        .rev()
        .find(|m| m.role == Role::Assistant)
    else {
        return String::new();
    };
    let mut answer = String::new();
    for segment in &last.segments {
        if let flemma_ast::Segment::Text(text) = segment {
            answer.push_str(&text.value);
        }
    }
    unescape_assistant(answer.trim()).into_owned()
}

/// A child's first resolver: the parent conversation's decision of the same call bounds it.
struct ParentGate {
    parent: Weak<Executor>,
}

#[async_trait]
impl Resolver for ParentGate {
    async fn resolve(
        &self,
        call: &ToolCall<'_>,
        _ctx: &ApprovalContext<'_>,
    ) -> Result<Verdict, ResolverError> {
        let Some(parent) = self.parent.upgrade() else {
            return Ok(Verdict::require_approval().because("the parent conversation is gone"));
        };
        // Failing closed: a parent whose options do not evaluate approves nothing by itself.
        Ok(match parent.decision_for(call.name, call.input).await {
            Ok(Decision::Approve) => {
                Verdict::pass().because("the parent conversation would run it")
            }
            Ok(Decision::Deny { reason }) => {
                Verdict::deny(reason).because("the parent conversation denies it")
            }
            Ok(_) => Verdict::require_approval().because("the parent conversation would ask"),
            Err(error) => Verdict::require_approval().because(format!(
                "the parent conversation's approvals could not be read: {}",
                error_chain(&error)
            )),
        })
    }
}

/// The parent's approver, asked about a child's call with the agent named in the preview.
struct ChildApprover {
    parent: Arc<dyn Approver>,
    agent: String,
}

#[async_trait]
impl Approver for ChildApprover {
    async fn ask(&self, call: &PendingCall) -> Answer {
        let mut shown = call.clone();
        shown.preview = format!("agent {}: {}", self.agent, call.preview);
        self.parent.ask(&shown).await
    }
}

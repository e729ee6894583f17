//! The `agent` tool: a call that delegates a task to a subagent, run by the session that runs
//! the call ([`flemma_core::Delegate`]).

use std::sync::Arc;

use flemma_core::preview::Preview;
use flemma_core::{DelegateRequest, ExecutionContext, Tool, ToolDefinition, ToolOutput};
use flemma_schema::dsl::{object, string};
use serde_json::Value;

use super::{AGENT_TOOL, Agents};
use crate::messages as msg;

/// The deepest a child may be by default: a parent's children do not start their own.
pub const DEFAULT_MAX_DEPTH: u32 = 1;

/// A host's subagents: the definitions the `agent` tool offers, and how deep children may
/// nest. Register [`tool`](Self::tool) in the registry and give the same value to
/// [`SessionBuilder::subagents`](crate::SessionBuilder::subagents), which lends the session's
/// provider, approvals and limits to the children.
///
/// ```
/// use flemma_runtime::agents::{AgentDefinition, Agents, Subagents};
/// use flemma_runtime::ToolRegistry;
///
/// let mut agents = Agents::new();
/// agents.register(AgentDefinition::new("reviewer", "Reviews a change.", "Review it.")?);
/// let subagents = Subagents::new(agents);
/// let registry = ToolRegistry::new();
/// registry.register(subagents.tool()?);
/// assert!(registry.is_executable("agent"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct Subagents {
    agents: Arc<Agents>,
    max_depth: u32,
}

impl Subagents {
    /// The subagents of `agents`; children start no children of their own
    /// ([`DEFAULT_MAX_DEPTH`]).
    pub fn new(agents: Agents) -> Self {
        Self {
            agents: Arc::new(agents),
            max_depth: DEFAULT_MAX_DEPTH,
        }
    }

    /// How deep children may nest: 1, a parent's children only; 2, their children too; 0, no
    /// child at all.
    #[must_use]
    pub fn max_depth(mut self, depth: u32) -> Self {
        self.max_depth = depth;
        self
    }

    /// The deepest a child may be.
    pub fn depth_limit(&self) -> u32 {
        self.max_depth
    }

    /// The definitions.
    pub fn agents(&self) -> &Agents {
        &self.agents
    }

    /// The `agent` tool offering these definitions.
    ///
    /// # Errors
    ///
    /// Never for the shipped schema; [`flemma_schema::SchemaError`] otherwise.
    pub fn tool(&self) -> Result<AgentTool, flemma_schema::SchemaError> {
        AgentTool::new(Arc::clone(&self.agents))
    }
}

/// The `agent` tool: `{"agent": NAME, "prompt": TEXT}` runs the subagent NAME on TEXT as a
/// child conversation of the call's session, and its result is the child's answer and where
/// its transcript is. Its description lists the agents with their descriptions.
#[derive(Debug)]
pub struct AgentTool {
    definition: ToolDefinition,
    agents: Arc<Agents>,
}

impl AgentTool {
    fn new(agents: Arc<Agents>) -> Result<Self, flemma_schema::SchemaError> {
        let mut description = String::from(
            "Delegate a task to a subagent: it works in a conversation of its own, with its own \
             instructions and tools, and its final answer is this call's result. Give it a \
             complete task; it does not see this conversation.",
        );
        if agents.is_empty() {
            description.push_str("\n\nNo agents are defined.");
        } else {
            description.push_str("\n\nAgents:");
            for agent in agents.iter() {
                let first = agent
                    .description()
                    .lines()
                    .next()
                    .unwrap_or_default()
                    .trim();
                description.push_str("\n- ");
                description.push_str(agent.name());
                description.push_str(": ");
                description.push_str(first);
            }
        }
        let definition = ToolDefinition::builder_for(
            AGENT_TOOL
                .parse()
                .map_err(flemma_schema::SchemaError::from)?,
            description,
        )
        .input(object([
            (
                "agent",
                string().describe("The agent's name, from the list above"),
            ),
            (
                "prompt",
                string().describe("The task, complete: the agent sees nothing else"),
            ),
        ]))
        // `flemma.background` runs a child as a job whose Job Result is its answer.
        .asynchronous(true)
        .build()?;
        Ok(Self { definition, agents })
    }
}

#[async_trait::async_trait]
impl Tool for AgentTool {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    async fn execute(&self, input: Value, ctx: &ExecutionContext) -> ToolOutput {
        let field = |name: &str| input.get(name).and_then(Value::as_str).unwrap_or_default();
        let (agent, prompt) = (field("agent").trim(), field("prompt"));
        if prompt.trim().is_empty() {
            return ToolOutput::error(msg::AGENT_NEEDS_PROMPT);
        }
        if self.agents.get(agent).is_none() {
            let known: Vec<&str> = self
                .agents
                .iter()
                .map(super::AgentDefinition::name)
                .collect();
            return ToolOutput::error(msg::unknown_agent(
                agent,
                self.agents.did_you_mean(agent),
                &known,
            ));
        }
        match ctx.delegate() {
            Some(delegate) => {
                delegate
                    .delegate(&DelegateRequest::new(agent, prompt), ctx)
                    .await
            }
            None => ToolOutput::error(msg::AGENT_NEEDS_SESSION),
        }
    }

    fn preview(&self, input: &Value, _max_len: usize) -> Option<Preview> {
        let agent = input.get("agent").and_then(Value::as_str)?;
        let prompt = input
            .get("prompt")
            .and_then(Value::as_str)
            .unwrap_or_default();
        Some(Preview::detail(format!("{agent}: {prompt}")))
    }

    /// A child runs as long as its own turns and calls take (each call has its own limit);
    /// cancelling the parent cancels it.
    fn time_limit(&self, _input: &Value, _ctx: &ExecutionContext) -> Option<std::time::Duration> {
        None
    }
}

//! `flemma.jobs.status`: the harness tool a model uses to ask about a job.

use flemma_schema::SchemaError;
use flemma_schema::builtin::inputs::JobStatusInput;
use serde_json::{Map, Value, json};

use crate::messages as msg;
use flemma_core::ExecutionContext;
use flemma_core::Tool;
use flemma_core::ToolDefinition;
use flemma_core::ToolOutput;
use flemma_core::preview::Preview;

/// The tool's name.
pub(crate) const NAME: &str = "flemma.jobs.status";

/// `flemma.jobs.status`: where a background job is (running, completed with its delivery
/// pending, completed, or completed and removed from the conversation).
#[derive(Debug)]
pub struct JobsStatus {
    definition: ToolDefinition,
}

impl JobsStatus {
    /// The tool, with the definition of flemma-schema's built-in table.
    ///
    /// # Errors
    ///
    /// Never for the shipped definition; [`SchemaError`] otherwise.
    pub fn new() -> Result<Self, SchemaError> {
        Ok(Self {
            definition: ToolDefinition::from_builtin(&flemma_schema::builtin::jobs_status())?,
        })
    }
}

#[async_trait::async_trait]
impl Tool for JobsStatus {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    async fn execute(&self, input: Value, ctx: &ExecutionContext) -> ToolOutput {
        // A call without a job id asks for the empty one, which names no job.
        let job_id = JobStatusInput::from_call(&input)
            .map(|input| input.job_id)
            .unwrap_or_default();
        ToolOutput::text(status(job_id.trim(), ctx).await.to_string())
    }

    fn preview(&self, input: &Value, _max_len: usize) -> Option<Preview> {
        let job_id = input.get("job_id").and_then(Value::as_str)?;
        Some(Preview::detail(job_id.to_owned()))
    }
}

/// The lookup order: the executor's jobs (running, or finished with the
/// delivery pending), a job running in another host (the journal), then the conversation.
async fn status(job_id: &str, ctx: &ExecutionContext) -> Value {
    let mut out = Map::new();
    let found = match ctx.jobs() {
        Some(jobs) => jobs.job_status(job_id).await,
        None => None,
    };
    if let Some(found) = found {
        let state = if found.delivery_pending {
            msg::JOB_STATE_DELIVERY_PENDING
        } else {
            msg::JOB_STATE_RUNNING
        };
        out.insert("status".into(), json!(state));
        out.insert("job_id".into(), json!(job_id));
        out.insert("tool_id".into(), json!(found.tool_id));
        out.insert("tool_name".into(), json!(found.tool));
        out.insert(
            "elapsed_seconds".into(),
            json!(whole(found.elapsed_seconds)),
        );
        return Value::Object(out);
    }
    let delivered = flemma_ast::find_job_result(ctx.document(), job_id).is_some();
    let state = if delivered {
        msg::JOB_STATE_COMPLETED
    } else {
        msg::JOB_STATE_REMOVED
    };
    out.insert("status".into(), json!(state));
    out.insert("job_id".into(), json!(job_id));
    Value::Object(out)
}

/// Whole seconds, never negative.
fn whole(seconds: f64) -> u64 {
    if seconds.is_finite() && seconds > 0.0 {
        // Bounded by the clock: far below u64::MAX.
        #[allow(clippy::cast_sign_loss)]
        let whole = seconds.floor() as u64;
        whole
    } else {
        0
    }
}

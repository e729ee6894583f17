//! The one thing a tool call may ask of the executor's jobs: where a job is
//! (`flemma.jobs.status`). The tool context holds it as a [`JobLookup`], so that
//! neither depends on the other's insides.

/// A job that runs, or that finished and waits for its delivery, as this host's jobs or the
/// journal know it.
#[derive(Debug, Clone, PartialEq)]
pub struct JobStatus {
    /// Finished, its Job Result not written yet; `false`: it still runs.
    pub delivery_pending: bool,
    /// The call it runs.
    pub tool_id: String,
    /// The tool.
    pub tool: String,
    /// Seconds since it started (until it completed).
    pub elapsed_seconds: f64,
}

/// Looks jobs up for `flemma.jobs.status` (this host's jobs,
/// then a job running in another live host or finished without delivery, from the journal).
#[async_trait::async_trait]
pub trait JobLookup: Send + Sync + std::fmt::Debug {
    /// Where `job_id` is; `None` when neither this host nor the journal has it running or
    /// waiting (the conversation answers then).
    async fn job_status(&self, job_id: &str) -> Option<JobStatus>;
}

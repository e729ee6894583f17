//! The executor: the three-phase tool cycle over one
//! [`Conversation`](crate::Conversation).
//!
//! Phase 1 gives every tool use without a result a placeholder (`approved`, `pending`,
//! `denied`, or `aborted` in an interrupted response), all in one batch of edits. Phase 2
//! settles each lifecycle status: pasted results become final, denied, rejected and aborted
//! calls get their error texts, pending calls go to the host's [`Approver`] when it has one,
//! and approved calls run through the registry, at most `tools.max_concurrent` at a time,
//! each result written as soon as it is ready. Phase 3 (sending) is the caller's:
//! [`CycleReport::next`] says whether the conversation is ready to send.
//!
//! The files: `state` holds the executor's state and the types its phases share (a leaf);
//! `builder` builds it; `cycle` is its public face (the cycle, cancellation, user actions);
//! `phases` and `plan` are Phase 1 and 2's decisions, `approvals` which calls run (the chain's
//! decision of a call, and which `(approved)` blocks are approvals), `run` the call runner, `complete` a
//! finished call's way into the transcript, `ran` the input a call ran with kept beside its
//! result, `hooked` the hooks' part in both phases and in
//! completion, `claim` one execution per call across hosts, and
//! `jobs` the executor as the host of its background jobs. Each `impl Executor` file imports
//! the state and the types, never each other's items, so no import circle runs through them.

mod approvals;
mod builder;
mod claim;
mod complete;
mod cycle;
mod hooked;
mod jobs;
mod phases;
mod plan;
mod ran;
mod run;
mod state;
mod types;

pub use builder::ExecutorBuilder;
pub use claim::CallClaim;
pub use state::Executor;
pub use types::{Completed, CycleReport, ExecutorError, Next, Refusal};

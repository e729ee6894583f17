//! flemma's conversations on object storage: a transcript kept as an object of an S3 bucket
//! (or any store of the [`object_store`] crate), edited by conditional puts; leases that say
//! which host runs a conversation; and a [`Worker`] that shares the conversations under a
//! prefix with other workers on other machines.
//!
//! - [`ObjectConversation`] is a [`Conversation`](flemma_core::Conversation): the
//!   executor and the session use it as they use a file. Its revision is the object's `ETag`;
//!   a write is a put with `If-Match`, so a concurrent writer's change is never lost. Given
//!   a local path, its result store is copied to the bucket (`dir/.flemma/name.chat/…`)
//!   before each transcript put and copied back when a host takes it.
//! - [`Lease`]: `dir/.flemma/name.chat/lease.json`, taken by a conditional create (or a
//!   conditional replace of an expired one), renewed by its holder, released after.
//! - [`BucketJournal`]: the conversation's background jobs, `dir/.flemma/name.chat/jobs/`,
//!   each entry naming the [`Machine`] whose process runs the job; hosts say they live under
//!   `.flemma-hosts/`.
//! - [`BucketPlacements`]: the calls placed `(pending)` for a person, `dir/.flemma/name.chat/placed/`,
//!   so that a person's approval holds on whichever host runs the conversation next.
//! - [`Worker`]: picks the ready conversations, leases each, answers the calls a dead holder
//!   left running ([`flemma_runtime::answer_interrupted`]), runs the host's runner (a session),
//!   releases the lease.
//!
//! The book's "Running on many machines" (`docs/many-machines.md`) has the bucket
//! layout, the lease rules and the failure table.

#![cfg_attr(docsrs, feature(doc_cfg))]
mod bucket;
mod conversation;
mod error;
mod journal;
mod lease;
mod listing;
mod machine;
mod placements;
mod results;
mod worker;

pub use bucket::{Bucket, ObjectUrl, RequestCounts};
pub use conversation::ObjectConversation;
pub use error::ObjectError;
pub use journal::{BucketJournal, MAX_ENTRY_BYTES, journal_prefix};
pub use lease::{Acquired, LEASE_FILE, Lease, LeaseRecord, lease_key, read_lease, store_prefix};
pub use machine::{HOSTS_PREFIX, HostRecord, Machine};
pub use placements::{BucketPlacements, placements_prefix};
pub use results::result_key;
pub use worker::{
    Assignment, Finished, Taken, Worker, WorkerOptions, is_ready, keep, local_path, take,
};

/// The `object_store` crate this one is built on (for [`Bucket::with_store`] and paths).
pub use object_store;

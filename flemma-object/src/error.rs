//! [`ObjectError`]: what can go wrong between a host and its bucket.

/// Why a bucket, a conversation object or a lease could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ObjectError {
    /// Not an object URL this crate reads (`s3://bucket/key`).
    #[error("{url}: not an object URL ({reason}); expected s3://BUCKET/KEY")]
    Url {
        /// The text given.
        url: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The bucket's client could not be built from the environment (`AWS_*` variables).
    #[error("cannot use the bucket {bucket}")]
    Connect {
        /// The bucket.
        bucket: String,
        /// The cause.
        #[source]
        source: object_store::Error,
    },
    /// A request to the bucket failed.
    #[error("{url}: {operation} failed")]
    Request {
        /// The object (or prefix) the request was about.
        url: String,
        /// What was asked (`get`, `put`, `list`).
        operation: &'static str,
        /// The cause.
        #[source]
        source: object_store::Error,
    },
    /// The object is not UTF-8 text.
    #[error("{url} is not UTF-8")]
    NotUtf8 {
        /// The object.
        url: String,
        /// The cause.
        #[source]
        source: std::string::FromUtf8Error,
    },
    /// A lease object does not decode.
    #[error("{url}: the lease does not decode")]
    LeaseRecord {
        /// The lease object.
        url: String,
        /// The cause.
        #[source]
        source: serde_json::Error,
    },
    /// Another writer changed the object first, and what this host had to write (a
    /// response's buffered appends) cannot be computed again on the new text.
    #[error("{url}: changed by another writer; not written")]
    Conflict {
        /// The object.
        url: String,
    },
    /// The conversation could not be read or edited (under its lease).
    #[error("{url}: the conversation could not be read or edited")]
    Conversation {
        /// The conversation.
        url: String,
        /// The cause.
        #[source]
        source: flemma_core::ConversationError,
    },
    /// A conversation's directory on this machine could not be made.
    #[error("cannot make {}", path.display())]
    Workdir {
        /// The directory.
        path: std::path::PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The lease this host held was taken over, or expired before it could be renewed: the
    /// host must stop writing the conversation.
    #[error("{url}: the lease is no longer held by this host ({why})")]
    LeaseLost {
        /// The lease object.
        url: String,
        /// What happened to it.
        why: &'static str,
    },
    /// A result of the conversation's store could not be read here (to copy it to the
    /// bucket) or written here (copied from the bucket).
    #[error("result file {}", path.display())]
    Results {
        /// The local file.
        path: std::path::PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

impl ObjectError {
    pub(crate) fn request(
        url: String,
        operation: &'static str,
        source: object_store::Error,
    ) -> Self {
        Self::Request {
            url,
            operation,
            source,
        }
    }
}

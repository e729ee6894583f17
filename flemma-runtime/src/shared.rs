//! The public traits for shared objects: an `Arc<T>` or a `Box<T>` of a [`Conversation`] or
//! an [`Approver`] (`T` may be unsized, `dyn Approver` included) is one too, so a host can keep
//! a handle on what it passes (a [`flemma_core::Tool`]'s are in flemma-core).

use std::path::Path;
use std::sync::Arc;

use flemma_ast::TextEdit;

use crate::conversation::{Conversation, ConversationError, Durability, Snapshot};
use crate::executor::{Answer, Approver, PendingCall};
use flemma_core::Revision;

macro_rules! shared {
    ($($ptr:ident)::+) => {
        #[async_trait::async_trait]
        impl<T: Conversation + ?Sized> Conversation for $($ptr)::+<T> {
            async fn snapshot(&self) -> Result<Snapshot, ConversationError> {
                (**self).snapshot().await
            }

            async fn apply(
                &self,
                revision: Revision,
                edits: &[TextEdit],
                durability: Durability,
            ) -> Result<Snapshot, ConversationError> {
                (**self).apply(revision, edits, durability).await
            }

            async fn sync(&self) -> Result<(), ConversationError> {
                (**self).sync().await
            }

            fn path(&self) -> Option<&Path> {
                (**self).path()
            }

            fn default_id(&self) -> Option<&str> {
                (**self).default_id()
            }

            fn store_writes(&self) -> Option<Arc<dyn flemma_store::StoreWrites>> {
                (**self).store_writes()
            }

            fn job_journal(
                &self,
                store_dir: &Path,
            ) -> Option<Arc<dyn crate::jobs::JobJournal>> {
                (**self).job_journal(store_dir)
            }

            fn placements(&self) -> Option<Arc<dyn crate::placements::Placements>> {
                (**self).placements()
            }

            async fn set_locked(&self, locked: bool) {
                (**self).set_locked(locked).await;
            }
        }

        #[async_trait::async_trait]
        impl<T: Approver + ?Sized> Approver for $($ptr)::+<T> {
            async fn ask(&self, call: &PendingCall) -> Answer {
                (**self).ask(call).await
            }
        }
    };
}

shared!(Arc);
shared!(Box);

/// An approver made of a synchronous closure; see [`approver_fn`].
pub struct FnApprover<F>(F);

impl<F> std::fmt::Debug for FnApprover<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FnApprover(..)")
    }
}

#[async_trait::async_trait]
impl<F> Approver for FnApprover<F>
where
    F: Fn(&PendingCall) -> Answer + Send + Sync,
{
    async fn ask(&self, call: &PendingCall) -> Answer {
        (self.0)(call)
    }
}

/// An [`Approver`] from a synchronous closure answering each pending call, beside
/// [`tool_fn`](flemma_core::tool_fn) and `flemma_approval::resolver_fn`.
///
/// ```
/// use flemma_runtime::{Answer, Approver, PendingCall, approver_fn};
///
/// let no_deletes = approver_fn(|call: &PendingCall| {
///     if call.input["command"].as_str().is_some_and(|c| c.contains("rm ")) {
///         Answer::Reject(Some("No deletions from this chat.".into()))
///     } else {
///         Answer::Approve
///     }
/// });
/// let call = PendingCall {
///     id: "toolu_1".parse()?,
///     tool: flemma_ids::ToolName::new("bash")?,
///     input: serde_json::json!({"command": "rm -rf build"}),
///     preview: "bash: $ rm -rf build".into(),
/// };
/// let runtime = tokio::runtime::Builder::new_current_thread().build()?;
/// assert_eq!(
///     runtime.block_on(no_deletes.ask(&call)),
///     Answer::Reject(Some("No deletions from this chat.".into()))
/// );
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn approver_fn<F>(f: F) -> FnApprover<F>
where
    F: Fn(&PendingCall) -> Answer + Send + Sync,
{
    FnApprover(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(command: &str) -> PendingCall {
        PendingCall {
            id: "toolu_1".parse().unwrap(),
            tool: flemma_ids::ToolName::new("bash").unwrap(),
            input: serde_json::json!({ "command": command }),
            preview: format!("bash: $ {command}"),
        }
    }

    #[tokio::test]
    async fn approver_fn_answers_with_the_closure_and_shares_as_arc_and_box() {
        let approver = approver_fn(|call: &PendingCall| {
            if call.preview.contains("rm") {
                Answer::Reject(None)
            } else {
                Answer::Approve
            }
        });
        assert_eq!(approver.ask(&call("ls")).await, Answer::Approve);
        assert_eq!(approver.ask(&call("rm x")).await, Answer::Reject(None));
        let shared: Arc<dyn Approver> = Arc::new(approver);
        assert_eq!(shared.ask(&call("rm x")).await, Answer::Reject(None));
        let boxed: Box<Arc<dyn Approver>> = Box::new(shared);
        assert_eq!(boxed.ask(&call("ls")).await, Answer::Approve);
    }

    #[tokio::test]
    async fn a_shared_conversation_is_a_conversation() {
        let memory = Arc::new(crate::MemoryConversation::new("@You:\nhello\n"));
        let boxed: Box<dyn Conversation> = Box::new(Arc::clone(&memory));
        let snap = boxed.snapshot().await.unwrap();
        boxed
            .apply(
                snap.revision,
                &[TextEdit::insert(3, vec!["world".into()])],
                crate::Durability::Durable,
            )
            .await
            .unwrap();
        assert_eq!(memory.text(), "@You:\nhello\nworld\n");
    }

    /// A conversation that keeps its placements and job journal elsewhere.
    struct Elsewhere(crate::MemoryConversation);

    #[async_trait::async_trait]
    impl Conversation for Elsewhere {
        async fn snapshot(&self) -> Result<Snapshot, ConversationError> {
            self.0.snapshot().await
        }

        async fn apply(
            &self,
            revision: Revision,
            edits: &[TextEdit],
            durability: crate::Durability,
        ) -> Result<Snapshot, ConversationError> {
            self.0.apply(revision, edits, durability).await
        }

        fn job_journal(&self, store_dir: &Path) -> Option<Arc<dyn crate::jobs::JobJournal>> {
            Some(Arc::new(crate::jobs::FileJournal::new(store_dir)))
        }

        fn placements(&self) -> Option<Arc<dyn crate::placements::Placements>> {
            Some(crate::placements::MemoryPlacements::shared())
        }

        fn default_id(&self) -> Option<&str> {
            Some("elsewhere")
        }
    }

    /// Behind an `Arc` or a `Box`, a conversation keeps what it says of itself: where its
    /// placements and jobs are kept (a conversation on object storage shares them with the
    /// other machines of its fleet; lost, each machine would keep its own).
    #[test]
    fn a_shared_conversation_keeps_where_its_state_lives() {
        let shared: Box<dyn Conversation> =
            Box::new(Arc::new(Elsewhere(crate::MemoryConversation::new(""))));
        assert!(shared.placements().is_some());
        assert!(shared.job_journal(Path::new("/nonexistent")).is_some());
        assert_eq!(shared.default_id(), Some("elsewhere"));
        assert!(shared.store_writes().is_none());
    }
}

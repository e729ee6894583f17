//! Tests of the shared conversations: an `Arc<T>` or a `Box<T>` of a
//! [`Conversation`](flemma_core::Conversation) is one too (the impls are flemma-core's), and
//! keeps what its conversation says of itself.

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Arc;

    use flemma_ast::TextEdit;
    use flemma_core::{Conversation, ConversationError, Revision, Snapshot};

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

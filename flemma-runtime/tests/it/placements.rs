//! The ledger of placements keeps only the placeholders that still wait for a person: a
//! settled or approver-decided call is forgotten, so an `(approved)` that comes back on it
//! later is not taken for the person's approval.

use std::sync::Arc;

use flemma_core::placements::Placements;
use flemma_core::{Answer, Approver, PendingCall};
use flemma_ids::ToolUseId;
use flemma_runtime::placements::MemoryPlacements;
use flemma_runtime::{Executor, MemoryConversation};

use crate::cycle::test_registry;

const CALL: &str =
    "@Assistant:\n**Tool Use:** `echo` (`toolu_1`)\n```json\n{\"text\": \"ran\"}\n```\n";

async fn placed(ledger: &MemoryPlacements) -> bool {
    ledger
        .get(&ToolUseId::new("toolu_1").unwrap())
        .await
        .unwrap()
        .is_some()
}

#[tokio::test]
async fn a_rejected_call_is_forgotten_and_an_approved_block_on_it_later_waits() {
    let conversation = Arc::new(MemoryConversation::new(CALL));
    let ledger = Arc::new(MemoryPlacements::new());
    let executor = Executor::builder(conversation.clone(), test_registry())
        .placements(ledger.clone())
        .build();
    executor.cycle().await.unwrap();
    let pending = conversation.text();
    assert!(pending.contains("`toolu_1` (pending)"), "{pending}");
    assert!(placed(&ledger).await);

    // The person rejects it in the file; the cycle settles it and forgets the placement.
    conversation.set_text(pending.replace("(pending)", "(rejected)"));
    executor.cycle().await.unwrap();
    let rejected = conversation.text();
    assert!(rejected.contains("rejected by the user"), "{rejected}");
    assert!(!placed(&ledger).await);

    // The block made `(approved)` and empty again later is not an approval of this host.
    let start = rejected.find("**Tool Result:**").unwrap();
    let again = format!(
        "{}**Tool Result:** `toolu_1` (approved)\n```\n```\n",
        &rejected[..start]
    );
    conversation.set_text(again);
    executor.cycle().await.unwrap();
    let after = conversation.text();
    assert!(!after.contains("\nran\n"), "{after}");
    assert!(after.contains("`toolu_1` (pending)"), "{after}");
}

struct Yes;

#[async_trait::async_trait]
impl Approver for Yes {
    async fn ask(&self, _: &PendingCall) -> Answer {
        Answer::Approve
    }
}

#[tokio::test]
async fn a_call_the_approver_decides_leaves_no_placement() {
    let conversation = Arc::new(MemoryConversation::new(CALL));
    let ledger = Arc::new(MemoryPlacements::new());
    let executor = Executor::builder(conversation.clone(), test_registry())
        .placements(ledger.clone())
        .approver(Arc::new(Yes))
        .build();
    executor.cycle().await.unwrap();
    let after = conversation.text();
    assert!(after.contains("`toolu_1`\n```\nran\n```"), "{after}");
    assert!(!placed(&ledger).await);
}

//! The session's durability points (the book's decision record 0086,
//! `docs/decisions/0086-durable-transcript.md`): a streamed response and the placeholders of its
//! calls are appended `Buffered` and made durable before a call starts or the turn goes to the
//! user; everything else, the results above all, is written `Durable`.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use flemma::ast::TextEdit;
use flemma::async_trait;
use flemma::core::Revision;
use flemma::core::{Conversation, ConversationError, Durability, Snapshot};
use flemma::providers::{ScriptedProvider, Turn};
use flemma::runtime::MemoryConversation;
use flemma::runtime::{Session, Stop};
use serde_json::json;

use crate::{chat, registry};

/// What the conversation was asked to do, in order.
#[derive(Debug, Clone, PartialEq)]
enum Write {
    /// A change, its durability, the text before and after it.
    Apply(Durability, String, String),
    Sync,
}

/// A memory conversation recording every change with the durability it was asked for.
struct Recording {
    inner: Arc<MemoryConversation>,
    log: Mutex<Vec<Write>>,
}

#[async_trait]
impl Conversation for Recording {
    async fn snapshot(&self) -> Result<Snapshot, ConversationError> {
        self.inner.snapshot().await
    }

    async fn apply(
        &self,
        revision: Revision,
        edits: &[TextEdit],
        durability: Durability,
    ) -> Result<Snapshot, ConversationError> {
        let before = self.inner.text();
        let applied = self.inner.apply(revision, edits, durability).await?;
        self.log.lock().unwrap().push(Write::Apply(
            durability,
            before,
            applied.text.as_str().to_owned(),
        ));
        Ok(applied)
    }

    async fn sync(&self) -> Result<(), ConversationError> {
        self.log.lock().unwrap().push(Write::Sync);
        Ok(())
    }

    fn path(&self) -> Option<&Path> {
        self.inner.path()
    }
}

#[tokio::test]
async fn a_response_and_its_placeholders_are_buffered_then_made_durable_before_the_call() {
    let recording = Arc::new(Recording {
        inner: chat(&["calculator"], "What is 6 * 7?"),
        log: Mutex::new(Vec::new()),
    });
    let provider = Arc::new(ScriptedProvider::new([
        Turn::text("Let me compute.\nNow.")
            .with_tool_use("calculator", json!({"expression": "6 * 7"})),
        Turn::text("It is\n42."),
    ]));
    let session = Session::builder(recording.clone(), registry(), provider)
        .flush_interval(Duration::ZERO)
        .build();
    assert_eq!(session.run().await.unwrap(), Stop::Finished);
    let log = recording.log.lock().unwrap().clone();
    // The run ends durable: its last write is a sync, after the final answer.
    assert_eq!(log.last(), Some(&Write::Sync), "{log:#?}");
    let mut result = None;
    for (i, write) in log.iter().enumerate() {
        let Write::Apply(durability, before, after) = write else {
            continue;
        };
        if *durability == Durability::Buffered {
            // Buffered changes only ever append: a response's lines, an empty placeholder,
            // never a result.
            let added = after.strip_prefix(before.as_str()).unwrap_or_else(|| {
                panic!("a buffered change that does not append: {before:?} -> {after:?}")
            });
            assert!(!added.contains("```\n42\n```"), "{added:?}");
        }
        if after.contains("```\n42\n```") && !before.contains("```\n42\n```") {
            assert_eq!(*durability, Durability::Durable);
            result = Some(i);
        }
    }
    // The call ran after the response and its placeholder were made durable: the write
    // before its result (the one before the call started) is durable or a sync.
    let result = result.expect("the result was written");
    assert!(
        !matches!(log[result - 1], Write::Apply(Durability::Buffered, ..)),
        "{log:#?}"
    );
    assert!(
        log[..result]
            .iter()
            .any(|w| matches!(w, Write::Apply(Durability::Buffered, _, a)
            if a.contains("**Tool Result:**"))),
        "the placeholder was buffered: {log:#?}"
    );
    let buffered = |needle: &str| {
        log.iter().any(|w| {
            matches!(w, Write::Apply(Durability::Buffered, b, a)
                if a.contains(needle) && !b.contains(needle))
        })
    };
    // The headers and the streamed lines of both responses were buffered.
    assert!(buffered("@Assistant:\nLet me compute."), "{log:#?}");
    assert!(buffered("It is\n42."), "{log:#?}");
}

/// The durable points when no call runs after a response that asked for one: with the
/// autopilot off the run stops after the response, which is synced then; a call left
/// `(pending)` for a person is synced by the cycle that placed it.
#[tokio::test]
async fn a_response_no_cycle_follows_and_a_pending_placeholder_are_synced() {
    let recording = Arc::new(Recording {
        inner: Arc::new(MemoryConversation::new(
            "```json\n{\"flemma\": {\"tools\": {\"autopilot\": false}}}\n```\n@You:\nGo.\n",
        )),
        log: Mutex::new(Vec::new()),
    });
    let provider = Arc::new(ScriptedProvider::new([Turn::tool_use(
        "calculator",
        json!({"expression": "1 + 1"}),
    )]));
    let session = Session::builder(recording.clone(), registry(), provider)
        .flush_interval(Duration::ZERO)
        .build();
    assert_eq!(session.run().await.unwrap(), Stop::AutopilotOff);
    // The response with its call was buffered, then synced: the last write of the run.
    assert_buffered_then_synced(&recording.log.lock().unwrap(), "**Tool Use:**");

    // A cycle places the call `(pending)` (no approver, not auto-approved): buffered, then
    // synced when the cycle ends.
    recording.log.lock().unwrap().clear();
    session.cycle().await.unwrap();
    assert_buffered_then_synced(&recording.log.lock().unwrap(), "(pending)");
}

/// The last two writes of `log`: a buffered change whose text holds `needle`, then a sync.
fn assert_buffered_then_synced(log: &[Write], needle: &str) {
    assert!(
        matches!(&log[log.len() - 2], Write::Apply(Durability::Buffered, _, a)
            if a.contains(needle)),
        "{log:#?}"
    );
    assert_eq!(log.last(), Some(&Write::Sync), "{log:#?}");
}

//! A long tool id still gets its full output stored (under a shortened name the notice gives),
//! and a store that cannot be written is a warning to the host, never silent.

use std::path::Path;
use std::sync::Arc;

use flemma_runtime::{Event, Executor, FileConversation, ToolRegistry};

use crate::scratch::Scratch;

const APPROVE_BASH: &str =
    "```json\n{\"flemma\": {\"tools\": {\"auto_approve\": [\"bash\"]}}}\n```\n";

/// A scratch directory of its own for `test`.
fn scratch(test: &str) -> Scratch {
    Scratch::new(format!(
        "flemma-runtime-store-{}-{test}",
        std::process::id()
    ))
}

/// Runs one cycle over `chat`, whose one call `id` runs `seq 1 200000` in bash; returns the
/// transcript afterwards and the executor's warnings.
async fn cycle_seq(chat: &Path, id: &str) -> (String, Vec<String>) {
    let text = format!(
        "{APPROVE_BASH}@You:\ncount\n\n@Assistant:\n**Tool Use:** `bash` (`{id}`)\n```json\n{{\"command\":\"seq 1 200000\",\"label\":\"count\"}}\n```\n"
    );
    std::fs::write(chat, text).unwrap();
    let registry = ToolRegistry::new();
    flemma_runtime::register_builtins(&registry).unwrap();
    let executor = Executor::builder(Arc::new(FileConversation::new(chat)), registry).build();
    let mut events = executor.subscribe();
    executor.cycle().await.unwrap();
    let mut warnings = Vec::new();
    while let Some(event) = events.try_recv() {
        if let Event::Warning(warning) = event {
            warnings.push(warning);
        }
    }
    (std::fs::read_to_string(chat).unwrap(), warnings)
}

fn seq(n: usize) -> String {
    (1..=n)
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_300_character_id_gets_its_full_output_stored() {
    // It used to get `[Showing lines 198001-200000 of 200000]` and no file: the store's file
    // name was longer than the file system allows.
    let dir = scratch("long-id");
    let chat = dir.join("long.chat");
    let id = format!("toolu_{}", "x".repeat(294));
    let (after, warnings) = cycle_seq(&chat, &id).await;
    assert_eq!(warnings, Vec::<String>::new());
    let notice = after
        .lines()
        .find(|l| l.starts_with("[Showing lines 198001-200000 of 200000"))
        .unwrap_or_else(|| panic!("no notice in {after}"));
    let path = notice
        .split_once(". Full output: ")
        .and_then(|(_, rest)| rest.strip_suffix(']'))
        .unwrap_or_else(|| panic!("the notice names no file: {notice}"));
    assert_eq!(std::fs::read_to_string(path).unwrap(), seq(200_000));
    assert!(
        Path::new(path).starts_with(dir.join(".flemma/long.chat")),
        "{path}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_cannot_be_written_is_a_warning() {
    let dir = scratch("blocked");
    // A file where the store's directory would be: nothing can be written under it.
    std::fs::write(dir.join(".flemma"), "not a directory").unwrap();
    let chat = dir.join("blocked.chat");
    let (after, warnings) = cycle_seq(&chat, "toolu_01").await;
    assert!(
        after.contains("[Showing lines 198001-200000 of 200000]"),
        "{after}"
    );
    // The claims directory cannot be made either (its own warning); the store's is one.
    let stored: Vec<_> = warnings
        .iter()
        .filter(|w| !w.starts_with("calls not claimed"))
        .collect();
    let [warning] = stored.as_slice() else {
        panic!("one store warning expected: {warnings:?}");
    };
    assert!(warning.starts_with("full output not stored: "), "{warning}");
    assert!(
        warning.contains(".flemma"),
        "the warning names the path: {warning}"
    );
}

//! Ids as file names (issue 35): distinct tool use ids never share a claim or a stored result.
//! `a b` and `a--b` used to be one name (`a--b`): the first call stayed `(approved)` and unrun,
//! and the second's output took the file the first named.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use flemma_core::{ToolDefinition, ToolOutput, async_tool_fn};
use flemma_runtime::{Executor, FileConversation, Next, ToolRegistry};
use proptest::prelude::*;

use crate::scratch::Scratch;

/// A scratch directory of its own for `test`.
fn scratch(test: &str) -> Scratch {
    Scratch::new(format!("flemma-runtime-ids-{}-{test}", std::process::id()))
}

/// `echo`: answers with its input's `text`, and records every run.
pub(crate) fn echo(runs: Arc<Mutex<Vec<String>>>) -> ToolRegistry {
    let registry = ToolRegistry::new();
    registry.register(async_tool_fn(
        ToolDefinition::builder("echo", "Echoes its text.")
            .unwrap()
            .asynchronous(true)
            .build()
            .unwrap(),
        move |input, _| {
            let runs = Arc::clone(&runs);
            async move {
                let text = input["text"].as_str().unwrap_or_default().to_owned();
                runs.lock().unwrap().push(text.clone());
                ToolOutput::text(text)
            }
        },
    ));
    registry
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ids_that_used_to_escape_alike_each_run_and_keep_their_own_result() {
    let dir = scratch("alike");
    let chat = dir.join("alike.chat");
    let text = "```json\n{\"flemma\": {\"tools\": {\"auto_approve\": [\"echo\"], \"store\": {\"materialize\": true}}}}\n```\n\
        @You:\ngo\n\n@Assistant:\n\
        **Tool Use:** `echo` (`a b`)\n```json\n{\"text\":\"first\"}\n```\n\n\
        **Tool Use:** `echo` (`a--b`)\n```json\n{\"text\":\"second\"}\n```\n";
    std::fs::write(&chat, text).unwrap();
    let runs = Arc::new(Mutex::new(Vec::new()));
    let executor = Executor::builder(
        Arc::new(FileConversation::new(&chat)),
        echo(Arc::clone(&runs)),
    )
    .build();
    let report = executor.cycle().await.unwrap();
    assert_eq!(report.next, Next::Send);
    let mut ran = runs.lock().unwrap().clone();
    ran.sort();
    assert_eq!(ran, ["first", "second"]);
    let after = std::fs::read_to_string(&chat).unwrap();
    assert!(
        after.ends_with(
            "**Tool Result:** `a b`\n```\nfirst\n```\n\n**Tool Result:** `a--b`\n```\nsecond\n```\n"
        ),
        "{after}"
    );
    let store = dir.join(".flemma/alike.chat");
    let read = |name: &str| std::fs::read_to_string(store.join(name)).unwrap();
    assert_eq!(read("tool_echo_a--20b.txt"), "first");
    assert_eq!(read("tool_echo_a--2d--2db.txt"), "second");
    // No claim is left behind.
    let claims: Vec<_> = std::fs::read_dir(store.join("calls"))
        .map(|d| d.filter_map(Result::ok).map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(claims.is_empty(), "{claims:?}");
}

/// The store path of a call's result under the default format (without a tool name: the
/// spec's de-duplication of the name, §11.3 step 5, is not about ids).
fn stored_at(id: &str) -> PathBuf {
    let mut options = flemma_config::Config::new().options().unwrap().tools.store;
    options.materialize = true;
    let store = flemma_store::Store::new(&options, Some(Path::new("/n/x.chat")), "1").unwrap();
    let id = flemma_ids::ToolUseId::from_header(id).unwrap();
    store.path_for(&id, None).unwrap()
}

proptest! {
    /// Distinct ids never get the same name, alone or as a result's store path; a name is one
    /// harmless segment. Many short ids of a small alphabet at once, so that the pairs the old
    /// escaping merged (`a b`, `a:b`, `a--b`) come up.
    #[test]
    fn distinct_ids_get_distinct_names(
        ids in prop::collection::hash_set("[ab :/.-]{1,4}|[ -~]{1,12}|\\PC{1,6}", 1..48),
    ) {
        let mut names = std::collections::HashMap::new();
        let mut paths = std::collections::HashMap::new();
        for id in &ids {
            let name = flemma_store::escape_id(id);
            prop_assert!(name != "." && name != "..");
            prop_assert!(name.bytes().all(|c| c.is_ascii_alphanumeric() || b"._-".contains(&c)));
            if let Some(other) = names.insert(name.clone(), id) {
                prop_assert!(false, "{other:?} and {id:?} are both {name}");
            }
            if let Some(other) = paths.insert(stored_at(id), id) {
                prop_assert!(false, "{other:?} and {id:?} are stored at one path");
            }
        }
    }

    /// Ids that need no escaping keep the name they always had.
    #[test]
    fn plain_ids_keep_their_names(id in "[A-Za-z0-9_][A-Za-z0-9._]{0,20}(-[A-Za-z0-9._]{1,5}){0,3}") {
        prop_assert_eq!(flemma_store::escape_id(&id), id);
    }
}

/// The pairs the old escaping merged, named: each now has a name of its own.
#[test]
fn pairs_the_old_escaping_merged_are_apart() {
    for (a, b) in [
        ("a b", "a--b"),
        ("a b", "a:b"),
        ("a/b", "a--2fb"),
        ("..", "--.."),
        ("é", "----"),
    ] {
        assert_ne!(
            flemma_store::escape_id(a),
            flemma_store::escape_id(b),
            "{a} / {b}"
        );
    }
}

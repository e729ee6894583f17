//! Conversation ids (store paths' `bufnr`, hooks' `session_id`): one per conversation, the
//! same wherever and whenever it is opened, another for another conversation.

use flemma_runtime::transcript::{default_conversation_id, file_conversation_id};
use flemma_runtime::{FileConversation, MemoryConversation};

fn is_uuid(id: &str) -> bool {
    let groups: Vec<usize> = id.split('-').map(str::len).collect();
    groups == [8, 4, 4, 4, 12] && id.chars().all(|c| c == '-' || c.is_ascii_hexdigit())
}

#[test]
fn a_files_conversation_has_the_id_of_its_path() {
    let dir = std::env::temp_dir().join(format!("flemma-ids-{}", std::process::id()));
    let a = dir.join("a.chat");
    let file = default_conversation_id(&FileConversation::new(&a));
    // The same file read into memory, and reached through another spelling of its path.
    let memory = default_conversation_id(&MemoryConversation::new("").with_path(&a));
    let dotted = default_conversation_id(&FileConversation::new(dir.join(".").join("a.chat")));
    assert_eq!(file, memory);
    assert_eq!(file, dotted);
    assert_eq!(file, file_conversation_id(&a));
    assert!(is_uuid(&file), "{file}");
    let b = default_conversation_id(&FileConversation::new(dir.join("b.chat")));
    assert_ne!(file, b);
}

#[test]
fn conversations_without_a_file_never_share_an_id() {
    let ids: std::collections::HashSet<String> = (0..100)
        .map(|_| default_conversation_id(&MemoryConversation::new("@You:\nhi\n")))
        .collect();
    assert_eq!(ids.len(), 100);
    assert!(ids.iter().all(|id| is_uuid(id)));
}

//! A conversation's id (hooks' `session_id`, store paths' `bufnr`) is its object's: every
//! worker of a fleet gives it the same one, whatever local path it keeps it under, and
//! another object has another.

use std::sync::Arc;

use flemma_object::{Bucket, ObjectConversation};
use flemma_runtime::transcript::{default_conversation_id, stable_conversation_id};

use crate::ok;

#[tokio::test]
async fn every_worker_gives_a_conversation_the_id_of_its_object() {
    let bucket = Bucket::with_store("chats", Arc::new(object_store::memory::InMemory::new()));
    let key = "team/a.chat".into();
    ok(ObjectConversation::create(&bucket, &key, "@You:\nhello\n").await);
    // Two workers, each with its own local copy of the conversation.
    let first = ok(ObjectConversation::open(&bucket, &key).await)
        .with_local_path("/srv/one/chats/team/a.chat");
    let second = ok(ObjectConversation::open(&bucket, &key).await)
        .with_local_path("/var/two/chats/team/a.chat");
    let id = default_conversation_id(&first);
    assert_eq!(id, default_conversation_id(&second));
    assert_eq!(id, stable_conversation_id(b"s3://chats/team/a.chat"));
    let other_key = "team/b.chat".into();
    let other = ok(ObjectConversation::create(&bucket, &other_key, "@You:\nhi\n").await);
    assert_ne!(default_conversation_id(&other), id);
}

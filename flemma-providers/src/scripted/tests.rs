use super::*;
use crate::provider::SendError;
use crate::test_support::tokens;
use futures_util::StreamExt as _;

#[test]
fn scripts_are_checked_when_loaded() {
    let bad = [
        (
            r#"[{"recording": "x.txt", "text": "hi"}]"#,
            "turn 1: a recording",
        ),
        (
            r#"[{"text": "a"}, {"recording": "x.txt", "provider": "gpt"}]"#,
            "turn 2: unknown provider",
        ),
        (
            r#"{"turns": [{"tool_uses": [{"name": "my tool"}]}]}"#,
            "turn 1: tool \"my tool\"",
        ),
    ];
    for (json, expected) in bad {
        let error = ScriptedProvider::from_json(json, ".")
            .unwrap_err()
            .to_string();
        assert!(error.starts_with(expected), "{json}: {error}");
    }
    let error = ScriptedProvider::from_json(r#"[{"txt": "typo"}]"#, ".").unwrap_err();
    assert!(
        matches!(error, ScriptError::InvalidTurn { turn: 1, .. }),
        "{error}"
    );
}

/// What was expected and where, never serde's `did not match any variant of untagged enum`.
#[test]
fn a_malformed_script_says_what_was_expected_and_where() {
    let describe = |json: &str| {
        let error = ScriptedProvider::from_json(json, ".").unwrap_err();
        let mut text = error.to_string();
        let mut cause = std::error::Error::source(&error);
        while let Some(error) = cause {
            text = format!("{text}: {error}");
            cause = error.source();
        }
        text
    };
    assert_eq!(
        describe(r#"[{"text": "a"}, {"txt": "typo"}]"#),
        "<inline>: turn 2 is not a valid turn: unknown field `txt`, expected one of \
             `thinking`, `text`, `tool_uses`, `usage`, `recording`, `provider`, `error`, `delay_ms`"
    );
    assert_eq!(
        describe(r#"{"turn": []}"#),
        "<inline> is not a valid script: expected a list of turns or {\"turns\": [...]}, \
             found an object without \"turns\""
    );
    assert_eq!(
        describe(r#""hello""#),
        "<inline> is not a valid script: expected a list of turns or {\"turns\": [...]}, \
             found a string"
    );
    assert_eq!(
        describe(r#"[{"text": 3}]"#),
        "<inline>: turn 1 is not a valid turn: invalid type: integer `3`, expected a string"
    );
    assert_eq!(
        describe("[{"),
        "<inline> is not a valid script: EOF while parsing an object at line 1 column 2"
    );
}

#[tokio::test]
async fn a_written_turn_streams_text_then_tool_calls_then_done() {
    let provider = ScriptedProvider::from_json(
            r#"[{"text": "Two words", "tool_uses": [{"name": "flemma.jobs.status", "input": {"job_id": "j"}}],
                 "usage": {"input_tokens": 3}}]"#,
            ".",
        )
        .unwrap();
    let request = Request { body: "{}".into() };
    let events: Vec<_> = provider.stream(request).await.unwrap().collect().await;
    assert_eq!(
        events,
        vec![
            StreamEvent::Text {
                text: "Two ".into()
            },
            StreamEvent::Text {
                text: "words".into()
            },
            StreamEvent::ToolCallStart {
                id: "toolu_scripted_1_1".into(),
                name: "flemma__jobs__status".into()
            },
            StreamEvent::ToolCall {
                id: "toolu_scripted_1_1".into(),
                name: "flemma__jobs__status".into(),
                arguments: r#"{"job_id":"j"}"#.into()
            },
            StreamEvent::Usage(tokens(3, 0)),
            StreamEvent::Done {
                stop: StopReason::ToolUse
            },
        ]
    );
    assert_eq!(provider.requests(), vec!["{}".to_owned()]);
    let exhausted = provider
        .stream(Request {
            body: String::new(),
        })
        .await;
    assert!(matches!(
        exhausted,
        Err(SendError::Scripted(ReplayError::Exhausted { turns: 1 }))
    ));
}

#[tokio::test]
async fn a_missing_recording_is_a_replay_error_that_keeps_its_cause() {
    let provider = ScriptedProvider::new([Turn::recording("no-such-recording.txt")]);
    let error = provider
        .stream(Request {
            body: String::new(),
        })
        .await
        .err()
        .unwrap();
    assert_eq!(
        error.to_string(),
        "cannot read the recording no-such-recording.txt"
    );
    let SendError::Scripted(ReplayError::Recording { source, .. }) = &error else {
        panic!("{error:?}");
    };
    assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
}

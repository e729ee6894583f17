//! The session loop against the scripted provider: the whole loop, `max_turns`, approval stops
//! and resumes, an approver, cancel mid-stream and mid-tool, the in-flight guards, errors.

use std::sync::Arc;
use std::time::Duration;

use flemma::ast::{Role, Segment};
use flemma::core::{Answer, Approver, PendingCall};
use flemma::providers::{ScriptedProvider, Turn};
use flemma::runtime::{AutopilotState, Session, SessionError, SessionEvent, SessionEvents, Stop};
use flemma::runtime::{Event, MemoryConversation};
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::{chat, registry};

use crate::scratch::Scratch;

fn session(chat: &Arc<MemoryConversation>, turns: Vec<Turn>) -> (Session, Arc<ScriptedProvider>) {
    let provider = Arc::new(ScriptedProvider::new(turns));
    let session = Session::builder(chat.clone(), registry(), provider.clone())
        .flush_interval(Duration::ZERO)
        .build();
    (session, provider)
}

fn drain(events: &mut SessionEvents) -> Vec<SessionEvent> {
    std::iter::from_fn(|| events.try_recv()).collect()
}

/// Waits for the first event `pick` accepts.
async fn wait_for(events: &mut SessionEvents, pick: impl Fn(&SessionEvent) -> bool) {
    tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(event) = events.recv().await {
            if pick(&event) {
                return;
            }
        }
        panic!("the session ended");
    })
    .await
    .expect("the event came");
}

#[tokio::test]
async fn a_scripted_loop_runs_the_tools_and_ends_with_the_answer() {
    let chat = chat(&["calculator"], "What is 6 * 7, and 2 + 2?");
    let (session, provider) = session(
        &chat,
        vec![
            Turn::text("Let me compute.")
                .with_tool_use("calculator", json!({"expression": "6 * 7"}))
                .with_tool_use("calculator", json!({"expression": "2 + 2"})),
            Turn::text("6 * 7 is 42\nand 2 + 2 is 4."),
        ],
    );
    let mut events = session.subscribe();
    assert_eq!(session.run().await.unwrap(), Stop::Finished);
    assert_eq!(session.state(), AutopilotState::Idle);
    assert_eq!(provider.remaining(), 0);
    insta::assert_snapshot!("scripted_loop", chat.text());
    // The second request carries both results.
    let second: serde_json::Value = serde_json::from_str(&provider.requests()[1]).unwrap();
    let results = &second["messages"][2]["content"];
    assert_eq!(results[0]["content"], "42");
    assert_eq!(results[1]["content"], "4");

    let events = drain(&mut events);
    let states: Vec<AutopilotState> = events
        .iter()
        .filter_map(|e| match e {
            SessionEvent::Autopilot(state) => Some(*state),
            _ => None,
        })
        .collect();
    assert_eq!(
        states,
        [
            AutopilotState::Armed,
            AutopilotState::Sending,
            AutopilotState::Armed,
            AutopilotState::Sending,
            AutopilotState::Idle
        ]
    );
    let text: String = events
        .iter()
        .filter_map(|e| match e {
            SessionEvent::TextDelta(t) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(text, "Let me compute.6 * 7 is 42\nand 2 + 2 is 4.");
    let executed = events
        .iter()
        .filter(|e| matches!(e, SessionEvent::Tool(Event::ToolExecuting { .. })))
        .count();
    assert_eq!(executed, 2);
    assert!(events.contains(&SessionEvent::TurnFinished {
        turn: 2,
        stop: Some(flemma::providers::StopReason::EndTurn),
        tool_uses: 0
    }));
    assert_eq!(events.last(), Some(&SessionEvent::Stopped(Stop::Finished)));
    // The transcript parses cleanly.
    assert!(flemma::ast::parse(&chat.text()).diagnostics.is_empty());
}

#[tokio::test]
async fn max_turns_stops_the_loop_with_the_spec_warning() {
    let chat = chat(&["calculator"], "Count.");
    let turns: Vec<Turn> = (0..5)
        .map(|_| Turn::tool_use("calculator", json!({"expression": "1 + 1"})))
        .collect();
    let provider = Arc::new(ScriptedProvider::new(turns));
    let session = Session::builder(chat.clone(), registry(), provider.clone())
        .max_turns(2)
        .build();
    let mut events = session.subscribe();
    assert_eq!(session.run().await.unwrap(), Stop::MaxTurns);
    // Three responses asked for tools; the third exceeded the limit and its call waits.
    assert_eq!(provider.remaining(), 2);
    let events = drain(&mut events);
    assert!(events.contains(&SessionEvent::Warning(
        "Autopilot stopped \u{2013} exceeded 2 consecutive turns.".into()
    )));
    let doc = flemma::ast::parse(&chat.text());
    let last = doc.messages.last().unwrap();
    assert_eq!(last.role, Role::Assistant);
    assert_eq!(last.tool_uses().count(), 1);
    assert_eq!(session.state(), AutopilotState::Idle);
}

#[tokio::test]
async fn the_max_turns_option_comes_from_the_frontmatter() {
    let chat = Arc::new(MemoryConversation::new(
        "```json\n{\"flemma\": {\"tools\": {\"auto_approve\": [\"calculator\"], \"autopilot\": {\"max_turns\": 1}}}}\n```\n@You:\nGo.\n",
    ));
    let turns: Vec<Turn> = (0..3)
        .map(|_| Turn::tool_use("calculator", json!({"expression": "1 + 1"})))
        .collect();
    let (session, provider) = session(&chat, turns);
    assert_eq!(session.run().await.unwrap(), Stop::MaxTurns);
    assert_eq!(provider.remaining(), 1);
}

#[tokio::test]
async fn autopilot_off_stops_after_the_response() {
    let chat = Arc::new(MemoryConversation::new(
        "```json\n{\"flemma\": {\"tools\": {\"auto_approve\": [\"calculator\"], \"autopilot\": false}}}\n```\n@You:\nGo.\n",
    ));
    let (session, provider) = session(
        &chat,
        vec![
            Turn::tool_use("calculator", json!({"expression": "1 + 1"})),
            Turn::text("2."),
        ],
    );
    assert_eq!(session.run().await.unwrap(), Stop::AutopilotOff);
    assert_eq!(provider.remaining(), 1);
    // The next run executes the call and sends.
    assert_eq!(session.run().await.unwrap(), Stop::Finished);
    assert!(chat.text().contains("```\n2\n```"));
}

#[tokio::test]
async fn without_an_approver_the_run_pauses_at_a_pending_call_and_resumes_once_approved() {
    let chat = chat(&[], "Compute.");
    let (session, provider) = session(
        &chat,
        vec![
            Turn::tool_use("calculator", json!({"expression": "3 * 3"})),
            Turn::text("9."),
        ],
    );
    assert_eq!(session.run().await.unwrap(), Stop::AwaitingApproval);
    assert_eq!(session.state(), AutopilotState::Paused);
    assert!(
        chat.text()
            .contains("**Tool Result:** `toolu_scripted_1_1` (pending)\n")
    );
    // Nothing changes until the transcript says so.
    assert_eq!(session.run().await.unwrap(), Stop::AwaitingApproval);
    session
        .executor()
        .approve("toolu_scripted_1_1")
        .await
        .unwrap();
    assert_eq!(session.run().await.unwrap(), Stop::Finished);
    assert_eq!(provider.remaining(), 0);
    assert!(chat.text().contains("```\n9\n```"));
}

struct NoMultiplication;

#[flemma::async_trait]
impl Approver for NoMultiplication {
    async fn ask(&self, call: &PendingCall) -> Answer {
        if call.input["expression"]
            .as_str()
            .unwrap_or_default()
            .contains('*')
        {
            Answer::Reject(Some("No multiplication today.".into()))
        } else {
            Answer::Approve
        }
    }
}

#[tokio::test]
async fn an_approver_decides_the_pending_calls() {
    let chat = chat(&[], "Compute.");
    let provider = Arc::new(ScriptedProvider::new([
        Turn::tool_use("calculator", json!({"expression": "3 * 3"}))
            .with_tool_use("calculator", json!({"expression": "3 + 3"})),
        Turn::text("6, and no 9."),
    ]));
    let session = Session::builder(chat.clone(), registry(), provider.clone())
        .executor(|e| e.approver(Arc::new(NoMultiplication)))
        .build();
    let mut events = session.subscribe();
    assert_eq!(session.run().await.unwrap(), Stop::Finished);
    let text = chat.text();
    // The approver's reason reaches the block and the model as `User feedback: <reason>`.
    assert!(
        text.contains("(error)\n```\nUser feedback: No multiplication today.\n```"),
        "{text}"
    );
    let second: serde_json::Value = serde_json::from_str(&provider.requests()[1]).unwrap();
    let results = &second["messages"][2]["content"];
    assert_eq!(
        results[0],
        json!({
            "type": "tool_result",
            "tool_use_id": "toolu_scripted_1_1",
            "content": "User feedback: No multiplication today.",
            "is_error": true,
        })
    );
    assert!(text.contains("```\n6\n```"), "{text}");
    let asked = drain(&mut events)
        .into_iter()
        .filter(|e| matches!(e, SessionEvent::Tool(Event::ApprovalAsked { .. })))
        .count();
    assert_eq!(asked, 2);
}

#[tokio::test]
async fn cancel_mid_stream_writes_the_abort_marker_and_the_transcript_still_parses() {
    let chat = chat(&["calculator"], "Tell me a story.");
    let (session, provider) = session(
        &chat,
        vec![
            Turn::text("Once upon a time\nthere was a parser\nthat never lost a byte.")
                .with_delay(Duration::from_millis(30)),
            Turn::text("The end."),
        ],
    );
    let mut events = session.subscribe();
    let running = tokio::spawn({
        let session = session.clone();
        async move { session.run().await }
    });
    wait_for(
        &mut events,
        |e| matches!(e, SessionEvent::TextDelta(t) if t.contains("there")),
    )
    .await;
    assert!(session.is_request_in_flight());
    // The guards, with the spec's texts.
    let refused = session.run().await.unwrap_err();
    assert!(matches!(refused, SessionError::RequestInFlight));
    assert_eq!(
        refused.to_string(),
        "A request is already in progress. Use <C-c> to cancel it first."
    );
    let refused = session.cycle().await.unwrap_err();
    assert_eq!(
        refused.to_string(),
        "Cannot execute tool while API request is in flight"
    );
    assert_eq!(session.cancel(), flemma::runtime::Cancelled::Request);
    assert_eq!(running.await.unwrap().unwrap(), Stop::Cancelled);
    assert_eq!(session.state(), AutopilotState::Idle);
    assert!(!session.is_request_in_flight());
    assert_eq!(provider.remaining(), 1);

    let text = chat.text();
    assert!(
        text.ends_with(
            "@Assistant:\nOnce upon a time\nthere \n\n<!-- flemma:aborted: Response interrupted by the user. -->\n"
        ),
        "{text}"
    );
    let doc = flemma::ast::parse(&text);
    assert!(doc.diagnostics.is_empty(), "{:?}", doc.diagnostics);
    let last = doc.messages.last().unwrap();
    assert!(matches!(last.segments.last(), Some(Segment::Aborted(_))));
    // The next run sends again; the aborted text goes as an HTML comment.
    chat.set_text(format!("{text}\n@You:\nGo on.\n"));
    assert_eq!(session.run().await.unwrap(), Stop::Finished);
    assert!(provider.requests()[1].contains("<!-- Response interrupted by the user. -->"));
}

#[tokio::test]
async fn cancel_before_anything_arrived_removes_the_empty_assistant_message() {
    let chat = chat(&[], "Hello?");
    let before = chat.text();
    let (session, _) = session(
        &chat,
        vec![Turn::text("Too late.").with_delay(Duration::from_secs(30))],
    );
    let mut events = session.subscribe();
    let running = tokio::spawn({
        let session = session.clone();
        async move { session.run().await }
    });
    wait_for(&mut events, |e| {
        matches!(e, SessionEvent::RequestSending { .. })
    })
    .await;
    // The header is written when the request goes out.
    tokio::time::timeout(Duration::from_secs(5), async {
        while !chat.text().ends_with("@Assistant:\n") {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .unwrap();
    session.cancel();
    assert_eq!(running.await.unwrap().unwrap(), Stop::Cancelled);
    assert_eq!(chat.text(), before);
    assert!(drain(&mut events).contains(&SessionEvent::RequestAborted));
}

#[tokio::test]
async fn cancelling_running_tools_aborts_them_and_stops_the_loop() {
    let chat = chat(&["slow"], "Wait.");
    let (session, provider) = session(
        &chat,
        vec![
            Turn::tool_use("slow", json!({"seconds": 60})),
            Turn::text("Never sent."),
        ],
    );
    let mut events = session.subscribe();
    let running = tokio::spawn({
        let session = session.clone();
        async move { session.run().await }
    });
    wait_for(&mut events, |e| {
        matches!(e, SessionEvent::Tool(Event::ToolExecuting { .. }))
    })
    .await;
    assert!(!session.is_request_in_flight());
    assert_eq!(session.cancel(), flemma::runtime::Cancelled::Tools);
    assert_eq!(running.await.unwrap().unwrap(), Stop::Cancelled);
    assert!(
        chat.text()
            .ends_with("(error)\n```\nUser aborted tool execution.\n```\n")
    );
    assert_eq!(provider.remaining(), 1);
}

#[tokio::test]
async fn a_stream_error_disarms_and_keeps_what_arrived() {
    let chat = chat(&[], "Hi.");
    let failing = Turn {
        error: Some("overloaded".into()),
        ..Turn::text("Partial answer")
    };
    let (session, _) = session(&chat, vec![failing]);
    let error = session.run().await.unwrap_err();
    assert_eq!(
        error.to_string(),
        "the scripted response failed: overloaded"
    );
    assert_eq!(session.state(), AutopilotState::Idle);
    assert!(
        chat.text().ends_with(
            "@Assistant:\nPartial answer\n\n<!-- flemma:aborted: Response incomplete: overloaded. -->\n"
        ),
        "{}",
        chat.text()
    );
}

#[tokio::test]
async fn an_exhausted_script_is_a_send_error_and_leaves_no_empty_message() {
    let chat = chat(&[], "Hi.");
    let before = chat.text();
    let (session, _) = session(&chat, vec![]);
    let error = session.run().await.unwrap_err();
    assert!(matches!(error, SessionError::Send { .. }), "{error}");
    assert_eq!(chat.text(), before);
}

#[tokio::test]
async fn usage_and_thinking_reach_the_events() {
    let chat = chat(&[], "Think.");
    let turn = Turn {
        usage: Some(flemma::providers::ScriptedUsage {
            input_tokens: Some(12),
            output_tokens: Some(3),
            ..Default::default()
        }),
        ..Turn::text("Done.").with_thinking("Hmm.")
    };
    let (session, _) = session(&chat, vec![turn]);
    let events = session.subscribe();
    session.run().await.unwrap();
    drop(session);
    // Once the session is gone the events end: read them as a stream.
    let events: Vec<SessionEvent> = futures_util::StreamExt::collect(events).await;
    assert!(events.contains(&SessionEvent::ThinkingDelta("Hmm.".into())));
    let usage = events
        .iter()
        .find_map(|e| match e {
            SessionEvent::Usage(usage) => Some(usage),
            _ => None,
        })
        .expect("a usage event");
    assert_eq!(
        (usage.turn, usage.usage.input, usage.usage.output),
        (1, 12, 3)
    );
    // The scripted provider's model has no price: tokens, no cost.
    assert_eq!(usage.cost, None);
    assert_eq!((usage.run.requests, usage.run.unpriced), (1, 1));
    assert!(chat.text().contains("<thinking>\nHmm.\n</thinking>"));
}

/// A file conversation edited by the user while the response streams: both the edit and the
/// whole response are kept (each write is checked against the file's revision).
#[tokio::test]
async fn a_user_edit_while_streaming_into_a_file_is_kept() {
    let dir = Scratch::new(format!("flemma-session-edit-{}", std::process::id()));
    let path = dir.join("edit.chat");
    std::fs::write(&path, "@You:\nHello.\n").unwrap();
    let chat = Arc::new(flemma::runtime::FileConversation::new(&path));
    let provider = Arc::new(ScriptedProvider::new([Turn::text(
        "one \ntwo \nthree \nfour",
    )
    .with_delay(Duration::from_secs(1))]));
    let session = Session::builder(chat, registry(), provider)
        .flush_interval(Duration::ZERO)
        .build();
    let mut events = session.subscribe();
    let running = tokio::spawn({
        let session = session.clone();
        async move { session.run().await }
    });
    wait_for(
        &mut events,
        |e| matches!(e, SessionEvent::TextDelta(t) if t.contains("two")),
    )
    .await;
    // Between two events (a second apart), once the session wrote "one": polled, not slept
    // for, since a loaded machine may take longer than any fixed pause to write it.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let now = loop {
        let now = std::fs::read_to_string(&path).unwrap();
        if now.ends_with("@Assistant:\none \n") || std::time::Instant::now() > deadline {
            break now;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    assert!(now.ends_with("@Assistant:\none \n"), "{now:?}");
    std::fs::write(&path, now.replace("Hello.", "Hello, edited.")).unwrap();
    assert_eq!(running.await.unwrap().unwrap(), Stop::Finished);
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "@You:\nHello, edited.\n\n@Assistant:\none \ntwo \nthree \nfour\n\n@You:\n"
    );
}

#[tokio::test]
async fn a_crlf_transcript_gets_crlf_lines() {
    let chat = Arc::new(MemoryConversation::new("@You:\r\nHi.\r\n"));
    let (session, _) = session(&chat, vec![Turn::text("Hello,\nworld.")]);
    assert_eq!(session.run().await.unwrap(), Stop::Finished);
    assert_eq!(
        chat.text(),
        "@You:\r\nHi.\r\n\r\n@Assistant:\r\nHello,\r\nworld.\r\n\r\n@You:\r\n"
    );
}

/// A recorded stream replayed by the scripted provider: an OpenAI response cut by
/// `max_output_tokens` keeps its text and warns.
#[tokio::test]
async fn a_truncated_recorded_response_warns() {
    let chat = chat(&[], "Write a lot.");
    let (session, _) = session(
        &chat,
        vec![Turn::recording(crate::peer("openai_incomplete_stream.txt"))],
    );
    let mut events = session.subscribe();
    assert_eq!(session.run().await.unwrap(), Stop::Finished);
    let events = drain(&mut events);
    assert!(
        events
            .iter()
            .any(|e| matches!(e, SessionEvent::Warning(w) if w.contains("max_output_tokens"))),
        "{events:?}"
    );
    assert!(events.contains(&SessionEvent::TurnFinished {
        turn: 1,
        stop: Some(flemma::providers::StopReason::MaxTokens),
        tool_uses: 0
    }));
    let doc = flemma::ast::parse(&chat.text());
    assert_eq!(doc.messages.len(), 3, "{}", chat.text());
}

/// A conversation asking for `wait` in the background (`frontmatter_tools` joins
/// `tools`), the scripted `turns`, and a session over them; first the directory that holds
/// the conversation's store (its job journal), dropped last.
fn background_session(
    test: &str,
    frontmatter_tools: &str,
    turns: Vec<Turn>,
    wait_for_jobs: bool,
) -> (
    Scratch,
    Arc<MemoryConversation>,
    Session,
    Arc<ScriptedProvider>,
) {
    let dir = Scratch::new(format!("flemma-session-jobs-{}-{test}", std::process::id()));
    let chat = Arc::new(MemoryConversation::new(format!(
        "```json\n{{\"flemma\": {{\"tools\": {{\"auto_approve\": [\"wait\"]{frontmatter_tools}}}}}}}\n```\n@You:\nWait in the background.\n"
    )));
    let provider = Arc::new(ScriptedProvider::new(turns));
    let session = Session::builder(chat.clone(), crate::background_registry(), provider.clone())
        .flush_interval(Duration::ZERO)
        .wait_for_jobs(wait_for_jobs)
        .executor(|e| e.config(crate::unnamed_store_in(&dir)))
        .build();
    (dir, chat, session, provider)
}

#[tokio::test]
async fn a_background_job_delivered_at_idle_resumes_the_loop_after_the_delay() {
    let (_dir, chat, session, provider) = background_session(
        "resume",
        ", \"autopilot\": {\"resume_delay\": 50}",
        vec![
            Turn::tool_use("wait", json!({"ms": 300, "flemma.background": true})),
            Turn::text("It runs in the background."),
            Turn::text("The job is done."),
        ],
        true,
    );
    let mut events = session.subscribe();
    assert_eq!(session.run().await.unwrap(), Stop::Finished);
    assert_eq!(provider.remaining(), 0);
    let text = chat.text();
    let job = text.split("(job=").nth(1).unwrap()[..12].to_owned();
    // The third request carries the Job Result as user text (spec 8.6).
    let third: serde_json::Value = serde_json::from_str(&provider.requests()[2]).unwrap();
    assert!(
        third.to_string().contains("[Job result for wait ("),
        "{third}"
    );
    assert!(
        text.contains(&format!("**Job Result:** `{job}`\n```\nwaited 300 ms\n```")),
        "{text}"
    );
    assert!(
        text.ends_with("@Assistant:\nThe job is done.\n\n@You:\n"),
        "{text}"
    );
    let order: Vec<&str> = drain(&mut events)
        .iter()
        .filter_map(|e| match e {
            SessionEvent::Tool(Event::JobSubmitted { .. }) => Some("submitted"),
            // Emitted by the job's own task, between two cycles: the one stream has it.
            SessionEvent::Tool(Event::JobCompleted { success: true, .. }) => Some("completed"),
            SessionEvent::Tool(Event::JobDelivered(_)) => Some("delivered"),
            SessionEvent::ResumeScheduled { delay_ms: 50 } => Some("scheduled"),
            SessionEvent::Resumed => Some("resumed"),
            _ => None,
        })
        .collect();
    assert_eq!(
        order,
        [
            "submitted",
            "completed",
            "delivered",
            "scheduled",
            "resumed"
        ]
    );
}

#[tokio::test]
async fn cancel_while_waiting_for_a_job_stops_without_resuming() {
    let (_dir, chat, session, _provider) = background_session(
        "cancel",
        "",
        vec![
            Turn::tool_use("wait", json!({"ms": 60_000, "flemma.background": true})),
            Turn::text("It runs."),
        ],
        true,
    );
    let mut events = session.subscribe();
    let run = tokio::spawn({
        let session = session.clone();
        async move { session.run().await }
    });
    wait_for(&mut events, |e| {
        matches!(e, SessionEvent::TurnFinished { turn: 2, .. })
    })
    .await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(session.cancel(), flemma::runtime::Cancelled::Resume);
    assert_eq!(run.await.unwrap().unwrap(), Stop::Cancelled);
    assert_eq!(session.state(), AutopilotState::Idle);
    // The job goes on; cancelling everything stops it, and its Job Result says so.
    assert_eq!(session.executor().running_jobs(), 1);
    session.cancel_all();
    session.executor().wait_jobs().await.unwrap();
    assert!(
        chat.text()
            .contains("(error)\n```\nUser aborted tool execution.\n```"),
        "{}",
        chat.text()
    );
}

#[tokio::test]
async fn without_waiting_a_run_with_jobs_running_returns_running() {
    let (_dir, chat, session, provider) = background_session(
        "no-wait",
        "",
        vec![
            Turn::tool_use("wait", json!({"ms": 100, "flemma.background": true})),
            Turn::text("It runs."),
            Turn::text("Done."),
        ],
        false,
    );
    assert_eq!(session.run().await.unwrap(), Stop::Running);
    session.executor().job_finished().await;
    // The next run's cycle delivers it, and the loop goes on.
    assert_eq!(session.run().await.unwrap(), Stop::Finished);
    assert!(chat.text().contains("waited 100 ms"));
    assert_eq!(provider.remaining(), 0);
}

/// A subscriber that does not read while its queue overflows reads the events that fit, then
/// one `Missed` with the count of the rest; one with room reads them all.
#[tokio::test]
async fn a_full_queue_reports_the_count_of_missed_events() {
    let turns = || {
        vec![
            Turn::tool_use("calculator", json!({"expression": "1 + 2"})),
            Turn::text("Done."),
        ]
    };
    // Each with a conversation id of its own: memory conversations of one process share the
    // default id's store and job journal, where another test's background job would be
    // reported as recovered (run elsewhere) in the middle of the events compared here.
    let everything = {
        let chat = chat(&["calculator"], "Add.");
        let session = Session::builder(
            chat.clone(),
            registry(),
            Arc::new(ScriptedProvider::new(turns())),
        )
        .flush_interval(Duration::ZERO)
        .executor(|e| e.conversation_id(format!("missed-all-{}", std::process::id())))
        .build();
        let mut events = session.subscribe();
        session.run().await.unwrap();
        drain(&mut events)
    };
    let chat = chat(&["calculator"], "Add.");
    let session = Session::builder(
        chat.clone(),
        registry(),
        Arc::new(ScriptedProvider::new(turns())),
    )
    .flush_interval(Duration::ZERO)
    .executor(|e| e.conversation_id(format!("missed-some-{}", std::process::id())))
    .event_capacity(3)
    .build();
    let mut events = session.subscribe();
    session.run().await.unwrap();
    let read = drain(&mut events);
    assert!(everything.len() > 4, "{everything:?}");
    let missed = u64::try_from(everything.len() - 3).unwrap();
    assert_eq!(read[..3], everything[..3]);
    assert_eq!(read[3..], [SessionEvent::Missed { count: missed }]);
}

fn conversation(text: &str) -> Arc<MemoryConversation> {
    Arc::new(MemoryConversation::new(text))
}

#[tokio::test]
async fn the_request_offers_every_enabled_tool_the_frontmatter_did_not_remove() {
    let chat = conversation("```json\n{\"flemma\": {\"tools\": [\"!slow\"]}}\n```\n@You:\nhi\n");
    let (session, provider) = session(&chat, vec![Turn::text("Hello.")]);
    assert_eq!(session.run().await.unwrap(), Stop::Finished);
    let request: serde_json::Value = serde_json::from_str(&provider.requests()[0]).unwrap();
    let names: Vec<&str> = request["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["calculator"]);
}

#[tokio::test]
async fn a_misspelled_tool_is_a_typed_error_and_nothing_is_sent() {
    let text =
        "```json\n{\n  \"flemma\": {\n    \"tools\": [\"+calculater\"]\n  }\n}\n```\n@You:\nhi\n";
    let chat = conversation(text);
    let (session, provider) = session(&chat, vec![Turn::text("Hello.")]);
    let error = session.run().await.unwrap_err();
    // The options' error, as `SessionError::Config` (one variant per failure: the cycle
    // found it, but it is not the executor's own).
    let SessionError::Config(flemma::config::ConfigError::Finalize { errors }) = &error else {
        panic!("{error:?}")
    };
    assert_eq!(
        errors.iter().map(ToString::to_string).collect::<Vec<_>>(),
        ["line 4: Unknown tool 'calculater' -- did you mean 'calculator'?"]
    );
    assert_eq!(errors[0].frontmatter_line(), Some(4));
    assert!(provider.requests().is_empty());
    assert_eq!(chat.text(), text);
}

/// The session's in-flight guard (spec §7.5 step 2) holds for its executor too: a host that
/// calls `session.executor().cycle()` while a request streams is refused, as
/// `session.cycle()` is.
#[tokio::test]
async fn the_executor_of_a_session_refuses_a_cycle_while_a_request_is_in_flight() {
    let chat = chat(&[], "Hello.");
    let provider = Arc::new(ScriptedProvider::new([
        Turn::text("one \ntwo").with_delay(Duration::from_secs(1))
    ]));
    let executor = flemma::runtime::Executor::builder(chat.clone(), registry());
    let session = Session::from_executor(executor, provider)
        .flush_interval(Duration::ZERO)
        .build();
    let mut events = session.subscribe();
    let running = tokio::spawn({
        let session = session.clone();
        async move { session.run().await }
    });
    wait_for(&mut events, |e| matches!(e, SessionEvent::TextDelta(_))).await;
    assert!(session.is_request_in_flight());
    let refused = session.executor().cycle().await.unwrap_err();
    assert!(
        matches!(
            &refused,
            flemma::runtime::ExecutorError::Refused(flemma::runtime::Refusal::RequestInFlight)
        ),
        "{refused:?}"
    );
    assert_eq!(
        refused.to_string(),
        "Cannot execute tool while API request is in flight"
    );
    assert!(matches!(
        session.cycle().await,
        Err(SessionError::ToolWhileRequest)
    ));
    assert_eq!(running.await.unwrap().unwrap(), Stop::Finished);
    // Once the request is done, the executor cycles again.
    session.executor().cycle().await.unwrap();
}

/// The frontmatter is evaluated once while it does not change: a run of two requests and
/// their tool cycles (a call, its result, the answer) evaluates it once, the cycles' options
/// and the requests' shared through the executor's transcript.
#[tokio::test]
async fn a_run_evaluates_an_unchanged_frontmatter_once() {
    let chat = chat(&["calculator"], "Compute.");
    let (session, provider) = session(
        &chat,
        vec![
            Turn::tool_use("calculator", json!({"expression": "2 + 2"})),
            Turn::text("4."),
        ],
    );
    assert_eq!(session.run().await.unwrap(), Stop::Finished);
    assert_eq!(provider.remaining(), 0);
    assert!(chat.text().contains("```\n4\n```"), "{}", chat.text());
    let transcript = session.executor().transcript();
    assert_eq!(transcript.frontmatter_evaluations(), 1);
    // A changed frontmatter is evaluated again, once.
    chat.set_text(chat.text().replace(
        "\"auto_approve\"",
        "\"max_concurrent\": 1, \"auto_approve\"",
    ));
    session.executor().cycle().await.unwrap();
    session.executor().cycle().await.unwrap();
    assert_eq!(transcript.frontmatter_evaluations(), 2);
}

/// Memory conversations nobody named get ids of their own, so two of them in one process do
/// not share a store (nor the job journal and claims under it).
#[test]
fn memory_conversations_get_a_store_of_their_own() {
    let options = flemma::config::Config::new().options().unwrap();
    let directory = |text: &str| {
        flemma::runtime::Executor::builder(
            Arc::new(MemoryConversation::new(text)),
            flemma::runtime::ToolRegistry::new(),
        )
        .build()
        .store_directory(&options)
        .unwrap()
    };
    assert_ne!(directory("@You:\nOne.\n"), directory("@You:\nTwo.\n"));
    // Named ones keep their names.
    let named = |id: &str| {
        flemma::runtime::Executor::builder(
            Arc::new(MemoryConversation::new("@You:\nHi.\n")),
            flemma::runtime::ToolRegistry::new(),
        )
        .conversation_id(id)
        .build()
        .store_directory(&options)
        .unwrap()
    };
    assert_eq!(named("7"), named("7"));
}

/// The offered tools follow the registry and the frontmatter from one request to the next
/// (the session keeps a request's options only while both are the same).
#[tokio::test]
async fn each_request_offers_the_tools_of_its_moment() {
    let chat = chat(&[], "One.");
    let registry = registry();
    let provider = Arc::new(ScriptedProvider::new(vec![
        Turn::text("1"),
        Turn::text("2"),
        Turn::text("3"),
        Turn::text("4"),
    ]));
    let session = Session::builder(chat.clone(), registry.clone(), provider.clone())
        .flush_interval(Duration::ZERO)
        .build();
    let offered = |n: usize| -> Vec<String> {
        let request: serde_json::Value = serde_json::from_str(&provider.requests()[n]).unwrap();
        request["tools"]
            .as_array()
            .map(|tools| {
                tools
                    .iter()
                    .map(|t| t["name"].as_str().unwrap().to_owned())
                    .collect()
            })
            .unwrap_or_default()
    };
    let ask = |text: &str| chat.set_text(format!("{}\n@You:\n{text}\n", chat.text().trim_end()));
    assert_eq!(session.run().await.unwrap(), Stop::Finished);
    let first = offered(0);
    assert!(first.iter().any(|t| t == "calculator") && !first.iter().any(|t| t == "clock"));
    // Nothing changed: the same tools.
    ask("Two.");
    assert_eq!(session.run().await.unwrap(), Stop::Finished);
    assert_eq!(offered(1), first);
    // A tool registered between requests is offered by the next.
    registry.register(flemma::core::tool_fn(
        flemma::core::ToolDefinition::builder("clock", "The time.")
            .unwrap()
            .build()
            .unwrap(),
        |_, _| flemma::core::ToolOutput::text("noon"),
    ));
    ask("Three.");
    assert_eq!(session.run().await.unwrap(), Stop::Finished);
    let mut with_clock = first.clone();
    with_clock.push("clock".to_owned());
    with_clock.sort();
    assert_eq!(offered(2), with_clock);
    // A frontmatter that narrows the list: the next request offers what it names.
    let text = chat.text().replacen(
        "{\"tools\": {\"auto_approve\": []}}",
        "{\"tools\": {\"auto_approve\": [], \"list\": [\"clock\"]}}",
        1,
    );
    assert_ne!(text, chat.text(), "the frontmatter was changed");
    chat.set_text(format!("{}\n@You:\nFour.\n", text.trim_end()));
    assert_eq!(session.run().await.unwrap(), Stop::Finished);
    assert_eq!(offered(3), ["clock"]);
}

/// A session without a provider runs the calls the last response asked for, writes their
/// results, and stops where it would send; its `cycle` is the same cycle.
#[tokio::test]
async fn a_tools_only_session_runs_the_calls_and_stops_where_it_would_send() {
    let text = format!(
        "{}@Assistant:\n**Tool Use:** `calculator` (`toolu_1`)\n\n```json\n{{\"expression\": \"6 * 7\"}}\n```\n",
        chat(&["calculator"], "What is 6 * 7?").text()
    );
    let chat = Arc::new(MemoryConversation::new(text));
    let session = Session::tools_only(chat.clone(), registry()).build();
    let mut events = session.subscribe();
    assert_eq!(session.run().await.unwrap(), Stop::NoProvider);
    assert_eq!(session.state(), AutopilotState::Idle);
    assert!(
        chat.text()
            .contains("**Tool Result:** `toolu_1`\n```\n42\n```"),
        "{}",
        chat.text()
    );
    let events = drain(&mut events);
    assert!(
        events.contains(&SessionEvent::Stopped(Stop::NoProvider)),
        "{events:?}"
    );
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, SessionEvent::RequestSending { .. })),
        "{events:?}"
    );
    // Nothing left to run: a second run stops at the same place, the text unchanged.
    let before = chat.text();
    assert_eq!(session.run().await.unwrap(), Stop::NoProvider);
    assert_eq!(chat.text(), before);
}

/// A scripted turn that asks for `calculator` and reports `input` tokens in, 100 out.
fn costly(input: u64) -> Turn {
    Turn {
        usage: Some(flemma::providers::ScriptedUsage {
            input_tokens: Some(input),
            output_tokens: Some(100),
            ..Default::default()
        }),
        ..Turn::tool_use("calculator", json!({"expression": "1 + 1"}))
    }
}

/// `budget.run.max_tokens` stops the run before the request that would cross it: each request
/// reads at least the last one's input, so the third (at least 3,000 more on 6,300 spent)
/// would cross 9,000 and is not sent.
#[tokio::test]
async fn a_run_stops_before_the_request_that_would_cross_its_token_budget() {
    let chat = Arc::new(MemoryConversation::new(
        "```json\n{\"flemma\": {\"tools\": {\"auto_approve\": [\"calculator\"]}, \
         \"budget\": {\"run\": {\"max_tokens\": 9000}}}}\n```\n@You:\nAdd.\n",
    ));
    let (session, provider) = session(
        &chat,
        vec![costly(3_000), costly(3_100), costly(3_200), Turn::text("2")],
    );
    let mut events = session.subscribe();
    assert_eq!(session.run().await.unwrap(), Stop::BudgetReached);
    assert_eq!(provider.requests().len(), 2);
    let reached = drain(&mut events)
        .into_iter()
        .find_map(|e| match e {
            SessionEvent::BudgetReached(reached) => Some(reached),
            _ => None,
        })
        .expect("a budget event");
    assert_eq!(
        reached.to_string(),
        "run budget max_tokens 9000 reached: 6300 tokens spent, the next request uses at least 3100"
    );
    assert_eq!(session.usage().usage.total(), 6_300);
    // The results are in the conversation, waiting: a new run has a budget of its own and
    // sends them.
    assert!(chat.text().ends_with("```\n2\n```\n"), "{}", chat.text());
    assert_eq!(session.run().await.unwrap(), Stop::Finished);
    assert_eq!(provider.requests().len(), 4);
    // The last turn reports no usage: one request of this run counted.
    assert_eq!(session.usage().requests, 1);
}

/// `budget.conversation.max_tokens` counts every run of the conversation (here, of a
/// conversation without a store, every run of the session): a second run does not start over.
#[tokio::test]
async fn a_conversation_budget_counts_every_run() {
    let chat = Arc::new(MemoryConversation::new(
        "```json\n{\"flemma\": {\"tools\": {\"auto_approve\": [\"calculator\"]}, \
         \"budget\": {\"conversation\": {\"max_tokens\": 9000}}, \
         \"tools.autopilot.max_turns\": 1}}\n```\n@You:\nAdd.\n",
    ));
    let (session, provider) = session(
        &chat,
        vec![costly(3_000), costly(3_100), costly(3_200), Turn::text("2")],
    );
    // Two responses with calls exceed `max_turns = 1`: 6,300 spent.
    assert_eq!(session.run().await.unwrap(), Stop::MaxTurns);
    assert_eq!(provider.requests().len(), 2);
    // A new run: 6,300 and at least 1 fit in 9,000; after its request (9,600 spent), the
    // next would cross.
    assert_eq!(session.run().await.unwrap(), Stop::BudgetReached);
    assert_eq!(provider.requests().len(), 3);
    // A third run sends nothing, though it spent nothing itself.
    assert_eq!(session.run().await.unwrap(), Stop::BudgetReached);
    assert_eq!(provider.requests().len(), 3);
    assert_eq!(session.usage().requests, 0);
}

/// A stream that stops halfway still counts what the provider reported before it stopped:
/// the request was billed.
#[tokio::test]
async fn a_stream_cut_halfway_still_counts_its_usage() {
    let chat = chat(&[], "Hi.");
    let turn = Turn {
        usage: Some(flemma::providers::ScriptedUsage {
            input_tokens: Some(500),
            output_tokens: Some(7),
            ..Default::default()
        }),
        error: Some("overloaded".into()),
        ..Turn::text("Partial")
    };
    let (session, _) = session(&chat, vec![turn]);
    let mut events = session.subscribe();
    let error = session.run().await.unwrap_err();
    assert!(matches!(error, SessionError::Stream { .. }), "{error}");
    let usage = drain(&mut events)
        .into_iter()
        .find_map(|e| match e {
            SessionEvent::Usage(usage) => Some(usage),
            _ => None,
        })
        .expect("the cut request's usage");
    assert_eq!((usage.usage.input, usage.usage.output), (500, 7));
    assert_eq!(session.usage().requests, 1);
}

//! `flemma run` built with the `otel` feature exports its spans over OTLP/HTTP to a receiver
//! the test starts on 127.0.0.1, which decodes them with the official OpenTelemetry proto
//! definitions (`opentelemetry-proto`).

use std::collections::BTreeMap;
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message as _;

use crate::{scratch, text};

/// One request the receiver took.
pub(crate) struct Received {
    path: String,
    headers: BTreeMap<String, String>,
    body: Vec<u8>,
}

/// An OTLP/HTTP receiver on 127.0.0.1: every request it takes is sent on the channel and
/// answered `200` with an empty `ExportTraceServiceResponse`. It stops by itself after a
/// minute.
pub(crate) fn receiver() -> (String, mpsc::Receiver<Received>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    listener.set_nonblocking(true).unwrap();
    let (send, receive) = mpsc::channel();
    std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            match listener.accept() {
                Ok((stream, _)) => {
                    let send = send.clone();
                    std::thread::spawn(move || serve(stream, &send));
                }
                Err(_) => std::thread::sleep(Duration::from_millis(10)),
            }
        }
    });
    (format!("http://{address}"), receive)
}

/// Serves the requests of one connection (keep-alive) until it closes or idles 10 s.
fn serve(stream: TcpStream, send: &mpsc::Sender<Received>) {
    stream.set_nonblocking(false).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut writer = stream.try_clone().unwrap();
    let mut reader = BufReader::new(stream);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let path = line.split(' ').nth(1).unwrap_or_default().to_owned();
        let mut headers = BTreeMap::new();
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).unwrap_or(0) == 0 {
                return;
            }
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                headers.insert(name.trim().to_ascii_lowercase(), value.trim().to_owned());
            }
        }
        let length: usize = headers
            .get("content-length")
            .and_then(|length| length.parse().ok())
            .unwrap_or(0);
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let _ = send.send(Received {
            path,
            headers,
            body,
        });
        let answer =
            "HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n";
        if writer.write_all(answer.as_bytes()).is_err() {
            return;
        }
    }
}

fn attribute<'a>(attributes: &'a [KeyValue], key: &str) -> Option<&'a any_value::Value> {
    attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref())
        .and_then(|value: &AnyValue| value.value.as_ref())
}

pub(crate) fn string<'a>(span: &'a Span, key: &str) -> &'a str {
    match attribute(&span.attributes, key) {
        Some(any_value::Value::StringValue(value)) => value,
        other => panic!("{}: {key} is {other:?}", span.name),
    }
}

fn int(span: &Span, key: &str) -> i64 {
    match attribute(&span.attributes, key) {
        Some(any_value::Value::IntValue(value)) => *value,
        other => panic!("{}: {key} is {other:?}", span.name),
    }
}

/// The spans of `requests` (each a `/v1/traces` protobuf request in which no `canaries` occur)
/// and the service names of their resources.
pub(crate) fn decode(requests: &[Received], canaries: &[&str]) -> (Vec<Span>, Vec<String>) {
    let mut spans = Vec::new();
    let mut services = Vec::new();
    for request in requests {
        assert_eq!(request.path, "/v1/traces");
        assert_eq!(
            request.headers.get("content-type").map(String::as_str),
            Some("application/x-protobuf")
        );
        for canary in canaries {
            assert!(
                !request
                    .body
                    .windows(canary.len())
                    .any(|window| window == canary.as_bytes()),
                "{canary} was exported"
            );
        }
        let decoded = ExportTraceServiceRequest::decode(request.body.as_slice()).unwrap();
        for resource in decoded.resource_spans {
            let attributes = resource.resource.map(|r| r.attributes).unwrap_or_default();
            if let Some(any_value::Value::StringValue(name)) =
                attribute(&attributes, "service.name")
            {
                services.push(name.clone());
            }
            for scope in resource.scope_spans {
                spans.extend(scope.spans);
            }
        }
    }
    (spans, services)
}

/// `flemma run` on `chat` with `script`, exporting to `endpoint`, with `env` besides.
fn run(chat: &Path, script: &Path, endpoint: &str, env: &[(&str, &str)]) -> std::process::Output {
    crate::flemma_command()
        .current_dir(chat.parent().unwrap())
        .args(["run", chat.to_str().unwrap(), "--provider", "scripted"])
        .args(["--script", script.to_str().unwrap(), "--approve", "all"])
        .args(["--set", "sandbox.enabled=false"])
        .env_remove("OTEL_SDK_DISABLED")
        .env_remove("OTEL_TRACES_EXPORTER")
        .env_remove("OTEL_SERVICE_NAME")
        .env_remove("OTEL_RESOURCE_ATTRIBUTES")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_PROTOCOL")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
        .env("OTEL_BSP_SCHEDULE_DELAY", "100")
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

/// The attack first: the collector's credentials in `OTEL_EXPORTER_OTLP_HEADERS` reach the
/// collector and no tool, and nothing of the conversation (the prompt, a tool's output) is
/// exported. Then the spans: their names, kinds, parents and attributes.
#[test]
fn flemma_run_exports_its_spans_over_otlp_http_protobuf() {
    const SECRET: &str = "canary-otlp-secret-7f3a";
    const PROMPT: &str = "canary-prompt-5b1c";
    const LISTED: &str = "canary-listed-file-9d2e";
    let chat = scratch(
        "otel-run.chat",
        format!("@You:\nList the files. {PROMPT}\n").as_bytes(),
    );
    let dir = chat.parent().unwrap().to_owned();
    std::fs::write(dir.join(LISTED), "x").unwrap();
    let script = scratch(
        "otel-run.script.json",
        br#"[{"tool_uses": [{"name": "ls", "input": {"path": "."}}, {"name": "bash", "input": {"command": "env"}}]}, {"text": "Done."}]"#,
    );
    let (endpoint, requests) = receiver();
    let out = run(
        &chat,
        &script,
        &endpoint,
        &[(
            "OTEL_EXPORTER_OTLP_HEADERS",
            &format!("authorization=Bearer {SECRET}"),
        )],
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let written = std::fs::read_to_string(&chat).unwrap();
    assert!(written.contains(LISTED), "{written}");
    assert!(written.contains("PATH="), "bash env ran: {written}");
    assert!(
        !written.contains(SECRET),
        "a tool saw the header: {written}"
    );
    assert!(!stderr.contains(SECRET), "{stderr}");

    let requests: Vec<Received> = requests.try_iter().collect();
    assert!(
        !requests.is_empty(),
        "nothing was exported; stderr: {stderr}"
    );
    for request in &requests {
        assert_eq!(
            request.headers.get("authorization"),
            Some(&format!("Bearer {SECRET}"))
        );
    }
    let (spans, services) = decode(&requests, &[PROMPT, LISTED]);
    assert!(services.iter().all(|name| name == "flemma"), "{services:?}");
    let named = |name: &str| -> Vec<&Span> { spans.iter().filter(|s| s.name == name).collect() };
    let all: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();

    let agent = named("invoke_agent flemma");
    assert_eq!(agent.len(), 1, "{all:?}");
    let agent = agent[0];
    assert!(agent.parent_span_id.is_empty());
    let conversation = string(agent, "gen_ai.conversation.id");
    assert_eq!(string(agent, "gen_ai.operation.name"), "invoke_agent");
    assert_eq!(
        string(agent, "flemma.chat.path"),
        chat.to_str().unwrap(),
        "the span finds the file"
    );

    let chats = named("chat scripted");
    assert_eq!(chats.len(), 2, "{all:?}");
    for (turn, span) in chats.iter().enumerate() {
        assert_eq!(span.parent_span_id, agent.span_id);
        assert_eq!(span.trace_id, agent.trace_id);
        // SpanKind::Client
        assert_eq!(span.kind, 3);
        assert_eq!(string(span, "gen_ai.operation.name"), "chat");
        assert_eq!(string(span, "gen_ai.request.model"), "scripted");
        assert_eq!(string(span, "gen_ai.conversation.id"), conversation);
        assert_eq!(int(span, "flemma.turn"), i64::try_from(turn).unwrap() + 1);
    }
    assert_eq!(
        string(chats[0], "gen_ai.response.finish_reasons"),
        "tool_call"
    );
    assert_eq!(string(chats[1], "gen_ai.response.finish_reasons"), "stop");

    for (tool, id) in [("ls", "toolu_scripted_1_1"), ("bash", "toolu_scripted_1_2")] {
        let calls = named(&format!("execute_tool {tool}"));
        assert_eq!(calls.len(), 1, "{all:?}");
        let call = calls[0];
        assert_eq!(call.parent_span_id, agent.span_id);
        assert_eq!(string(call, "gen_ai.tool.name"), tool);
        assert_eq!(string(call, "gen_ai.tool.call.id"), id);
        assert_eq!(string(call, "flemma.chat.path"), chat.to_str().unwrap());
        assert_eq!(string(call, "flemma.tool.status"), "ok");
    }
    let approvals = named("flemma.approval");
    assert_eq!(approvals.len(), 2, "{all:?}");
    assert!(approvals.iter().all(|s| s.parent_span_id == agent.span_id));
}

/// A protocol the build does not have is a warning, and the run goes on without an export.
#[test]
fn an_unsupported_protocol_is_a_warning_and_nothing_is_exported() {
    let chat = scratch("otel-grpc.chat", b"@You:\nHi.\n");
    let script = scratch("otel-grpc.script.json", br#"[{"text": "Hello."}]"#);
    let (endpoint, requests) = receiver();
    let out = run(
        &chat,
        &script,
        &endpoint,
        &[("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc")],
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains(
            "flemma: OTLP export: OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=\"grpc\": only http/protobuf is supported\n"
        ),
        "{stderr}"
    );
    assert_eq!(requests.try_iter().count(), 0);
}

/// `OTEL_SDK_DISABLED=true` wins over an endpoint: nothing is dialled.
#[test]
fn otel_sdk_disabled_turns_the_export_off() {
    let chat = scratch("otel-disabled.chat", b"@You:\nHi.\n");
    let script = scratch("otel-disabled.script.json", br#"[{"text": "Hello."}]"#);
    let (endpoint, requests) = receiver();
    let out = run(&chat, &script, &endpoint, &[("OTEL_SDK_DISABLED", "true")]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(requests.try_iter().count(), 0);
    // The same run without it is exported (the receiver works).
    let chat = scratch("otel-enabled.chat", b"@You:\nHi.\n");
    let out = run(&chat, &script, &endpoint, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(requests.try_iter().count() > 0);
}

/// `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true` (the host's environment) records
/// the messages and the tools' inputs and results on the exported spans.
#[test]
fn the_capture_variable_exports_the_content() {
    const PROMPT: &str = "canary-captured-prompt-3c7e";
    let chat = scratch(
        "otel-capture.chat",
        format!("@You:\nList the files. {PROMPT}\n").as_bytes(),
    );
    let script = scratch(
        "otel-capture.script.json",
        br#"[{"tool_uses": [{"name": "ls", "input": {"path": "."}}]}, {"text": "Done."}]"#,
    );
    let (endpoint, requests) = receiver();
    let out = run(
        &chat,
        &script,
        &endpoint,
        &[("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let requests: Vec<Received> = requests.try_iter().collect();
    let (spans, _) = decode(&requests, &[]);
    let first = spans.iter().find(|s| s.name == "chat scripted").unwrap();
    let input: serde_json::Value =
        serde_json::from_str(string(first, "gen_ai.input.messages")).unwrap();
    assert_eq!(
        input[0]["parts"][0]["content"],
        format!("List the files. {PROMPT}")
    );
    let call = spans.iter().find(|s| s.name == "execute_tool ls").unwrap();
    assert_eq!(
        string(call, "gen_ai.tool.call.arguments"),
        r#"{"path":"."}"#
    );
    assert!(string(call, "gen_ai.tool.call.result").contains("otel-capture.chat"));
}

/// A collector that is not there: the SDK's lines on stderr, the run's outcome unchanged.
#[test]
fn an_unreachable_collector_is_reported_and_the_run_goes_on() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let chat = scratch("otel-unreachable.chat", b"@You:\nHi.\n");
    let script = scratch("otel-unreachable.script.json", br#"[{"text": "Hello."}]"#);
    let out = run(&chat, &script, &endpoint, &[]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(text(&out.stdout), "Hello.\n");
    assert!(
        stderr.contains("BatchSpanProcessor.ExportError"),
        "{stderr}"
    );
}

/// A relative FILE, run from its directory: the spans name the file by its whole path.
#[test]
fn a_relative_file_is_named_by_its_whole_path() {
    let chat = scratch("otel-relative.chat", b"@You:\nHi.\n");
    let script = scratch("otel-relative.script.json", br#"[{"text": "Hello."}]"#);
    let (endpoint, requests) = receiver();
    let out = crate::flemma_command()
        .current_dir(chat.parent().unwrap())
        .args(["run", "otel-relative.chat", "--provider", "scripted"])
        .args(["--script", script.to_str().unwrap()])
        .env_remove("OTEL_SDK_DISABLED")
        .env_remove("OTEL_TRACES_EXPORTER")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let requests: Vec<Received> = requests.try_iter().collect();
    let (spans, _) = decode(&requests, &[]);
    let agent = spans
        .iter()
        .find(|s| s.name == "invoke_agent flemma")
        .unwrap();
    assert_eq!(
        std::path::Path::new(string(agent, "flemma.chat.path")),
        chat.canonicalize().unwrap()
    );
}

//! Sends a `.chat` conversation to a provider and appends the answer to the file.
//!
//! ```text
//! ANTHROPIC_API_KEY=… cargo run --example send -- notes.chat
//! OPENAI_API_KEY=… cargo run --example send -- notes.chat openai gpt-5
//! cargo run --example send -- notes.chat vertex --dry-run     # print the body, send nothing
//! ```
//!
//! `FLEMMA_BASE_URL` sends to another base URL (a proxy, or a local server).
//!
//! The conversation's templates and `@./file` references are rendered (Jinja here; a host
//! built with the `lua` feature can pass `LuaEngine`), diagnostics are printed, the request
//! goes out with retries, and the streamed answer is written as `.chat` text (text, then each
//! complete tool call as a `**Tool Use:**` block, thinking last). Running the tools and the
//! approval loop is the session's job, not this example's.

#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "an example program talks to its user on the terminal"
)]

use std::io::Write as _;

use flemma::providers::{
    Endpoint, HttpTransport, PromptBuilder, ProviderKind, RequestOptions, ResponseWriter,
    TransportConfig, stream_events_with,
};

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::process::ExitCode {
    match send().await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn send() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let dry_run = args.iter().any(|a| a == "--dry-run");
    let mut args = args.into_iter().filter(|a| a != "--dry-run");
    let path = args
        .next()
        .ok_or("usage: send FILE [anthropic|openai|openai-chat|vertex] [MODEL] [--dry-run]")?;
    let kind = match args.next().as_deref().unwrap_or("anthropic") {
        "anthropic" => ProviderKind::Anthropic,
        "openai" => ProviderKind::OpenAiResponses,
        "openai-chat" => ProviderKind::OpenAiChat,
        "vertex" => ProviderKind::Vertex,
        other => return Err(format!("unknown provider {other}").into()),
    };
    let model = args
        .next()
        .unwrap_or_else(|| kind.default_model().to_owned());

    let text = std::fs::read_to_string(&path)?;
    let doc = flemma::ast::parse(&text);
    let prompt = PromptBuilder::new().chat_path(&path).build(&doc);
    for d in &prompt.diagnostics {
        eprintln!("{path}:{}: {}: {}", d.line, d.severity.as_str(), d.message);
    }
    if prompt.has_errors() {
        return Err("a template failed; fix it before sending".into());
    }
    let body = kind
        .request(&prompt, &RequestOptions::new(&model))
        .to_json();
    if dry_run {
        println!("{body}");
        return Ok(());
    }

    let mut endpoint = Endpoint::from_env(kind, &model)?;
    if let Ok(url) = std::env::var("FLEMMA_BASE_URL") {
        // A proxy, or a local server replaying a recording.
        endpoint = endpoint.with_base_url(url);
    }
    let transport = HttpTransport::new(TransportConfig::default())?;
    let mut decoder = kind.decoder();
    let mut writer = ResponseWriter::new();
    let mut answer = String::new();
    stream_events_with(&transport, &endpoint, body, decoder.as_mut(), |event| {
        let piece = writer.apply(&event);
        eprint!("{piece}");
        answer.push_str(&piece);
    })
    .await?;
    answer.push_str(&writer.finish());

    let separator = if text.ends_with('\n') { "\n" } else { "\n\n" };
    let mut file = std::fs::OpenOptions::new().append(true).open(&path)?;
    write!(
        file,
        "{separator}@Assistant:\n{}\n\n@You:\n",
        answer.trim_end()
    )?;
    Ok(())
}

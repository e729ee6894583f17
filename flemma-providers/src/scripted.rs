//! [`ScriptedProvider`]: scripted responses without network.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use flemma_config::Options;
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::event::{StopReason, StreamEvent};
use crate::kind::ProviderKind;
use crate::prompt::Prompt;
use crate::provider::{EventStream, Provider, Request, SendError};
use crate::request::RequestOptions;
use crate::sse::SseDecoder;
use crate::vertex::VertexDecoder;
use flemma_ids::encode_tool_name;

/// Why a script could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ScriptError {
    /// The script file could not be read.
    #[error("cannot read the script {}", path.display())]
    Read {
        /// The script.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The script is not JSON.
    #[error("{} is not a valid script", path.display())]
    Parse {
        /// The script.
        path: PathBuf,
        /// The cause (with its line and column).
        #[source]
        source: serde_json::Error,
    },
    /// The script is JSON, but neither a list of turns nor `{"turns": [...]}`.
    #[error(
        "{} is not a valid script: expected a list of turns or {{\"turns\": [...]}}, found {found}",
        path.display()
    )]
    Shape {
        /// The script.
        path: PathBuf,
        /// What the JSON is instead (`a string`, `an object without \"turns\"`).
        found: &'static str,
    },
    /// A turn of the script does not read as a turn.
    #[error("{}: turn {turn} is not a valid turn", path.display())]
    InvalidTurn {
        /// The script.
        path: PathBuf,
        /// The turn (1-based).
        turn: usize,
        /// What is wrong (an unknown field, a wrong type).
        #[source]
        source: serde_json::Error,
    },
    /// A turn is inconsistent.
    #[error("turn {turn}: {message}")]
    Turn {
        /// The turn (1-based).
        turn: usize,
        /// What is wrong.
        message: String,
    },
}

/// Why a [`ScriptedProvider`] could not replay its next turn (inside
/// [`SendError::Scripted`](crate::SendError::Scripted)).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReplayError {
    /// The provider was asked for more turns than its script has.
    #[error("the script has no turn left (it had {turns})")]
    Exhausted {
        /// The number of turns the script had.
        turns: usize,
    },
    /// A scripted turn's recording could not be read.
    #[error("cannot read the recording {}", path.display())]
    Recording {
        /// The recording.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// One scripted tool call.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedToolUse {
    /// The tool's name (`ls`, `flemma.jobs.status`).
    pub name: String,
    /// The call id; `toolu_scripted_<turn>_<n>` when absent.
    #[serde(default)]
    pub id: Option<String>,
    /// The input.
    #[serde(default)]
    pub input: Map<String, Value>,
}

/// Token counts a scripted turn reports, in the meaning of [`Usage`](crate::Usage):
/// `input_tokens` is the whole prompt, cached or not; `output_tokens` the whole answer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedUsage {
    /// Input tokens.
    #[serde(default)]
    pub input_tokens: Option<u64>,
    /// Output tokens.
    #[serde(default)]
    pub output_tokens: Option<u64>,
    /// Of the input, the tokens read from the prompt cache.
    #[serde(default)]
    pub cache_read_tokens: Option<u64>,
    /// Of the input, the tokens written to the prompt cache.
    #[serde(default)]
    pub cache_write_tokens: Option<u64>,
    /// Of the output, the reasoning tokens.
    #[serde(default)]
    pub reasoning_tokens: Option<u64>,
}

impl ScriptedUsage {
    /// These counts as a [`Usage`](crate::Usage) (a count left out is 0).
    pub fn usage(&self) -> crate::Usage {
        crate::Usage {
            input: self.input_tokens.unwrap_or(0),
            output: self.output_tokens.unwrap_or(0),
            cache_read: self.cache_read_tokens.unwrap_or(0),
            cache_write: self.cache_write_tokens.unwrap_or(0),
            reasoning: self.reasoning_tokens.unwrap_or(0),
            ..crate::Usage::default()
        }
    }
}

/// One scripted response (see [`ScriptedProvider`] for the JSON form).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Turn {
    /// Thinking text.
    #[serde(default)]
    pub thinking: Option<String>,
    /// Visible text, streamed in word-sized deltas.
    #[serde(default)]
    pub text: Option<String>,
    /// Tool calls, after the text.
    #[serde(default)]
    pub tool_uses: Vec<ScriptedToolUse>,
    /// Token counts to report.
    #[serde(default)]
    pub usage: Option<ScriptedUsage>,
    /// A recorded SSE stream to decode instead.
    #[serde(default)]
    pub recording: Option<PathBuf>,
    /// The recording's provider (default: from its file name).
    #[serde(default)]
    pub provider: Option<String>,
    /// An error the stream reports (after the text, instead of completing).
    #[serde(default)]
    pub error: Option<String>,
    /// Milliseconds to wait before each event.
    #[serde(default)]
    pub delay_ms: u64,
}

impl Turn {
    /// A turn that answers `text`.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            text: Some(text.into()),
            ..Self::default()
        }
    }

    /// A turn that calls `tool` with `input` (a JSON object; anything else becomes `{}`).
    pub fn tool_use(tool: impl Into<String>, input: Value) -> Self {
        Self::default().with_tool_use(tool, input)
    }

    /// A turn that replays a recorded SSE stream.
    pub fn recording(path: impl Into<PathBuf>) -> Self {
        Self {
            recording: Some(path.into()),
            ..Self::default()
        }
    }

    /// Adds a tool call.
    #[must_use]
    pub fn with_tool_use(mut self, tool: impl Into<String>, input: Value) -> Self {
        let Value::Object(input) = input else {
            return self.with_tool_use(tool, Value::Object(Map::new()));
        };
        self.tool_uses.push(ScriptedToolUse {
            name: tool.into(),
            id: None,
            input,
        });
        self
    }

    /// Sets the thinking text.
    #[must_use]
    pub fn with_thinking(mut self, thinking: impl Into<String>) -> Self {
        self.thinking = Some(thinking.into());
        self
    }

    /// Waits `delay` before each event.
    #[must_use]
    pub fn with_delay(mut self, delay: Duration) -> Self {
        self.delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX);
        self
    }

    fn check(&self, turn: usize) -> Result<(), ScriptError> {
        let fail = |message: String| Err(ScriptError::Turn { turn, message });
        let written = self.text.is_some() || self.thinking.is_some() || !self.tool_uses.is_empty();
        if self.recording.is_some() && (written || self.error.is_some()) {
            return fail("a recording turn has no text, thinking, tool_uses or error".into());
        }
        if let Some(provider) = &self.provider
            && ProviderKind::from_name(provider).is_none()
        {
            return fail(format!(
                "unknown provider {provider:?} (anthropic, openai, openai-chat, vertex)"
            ));
        }
        for tool_use in &self.tool_uses {
            if let Err(error) = flemma_ids::ToolName::new(&tool_use.name) {
                return fail(format!("tool {:?}: {error}", tool_use.name));
            }
        }
        Ok(())
    }

    /// The events of a written-out turn (`number` is 1-based).
    fn events(&self, number: usize) -> Vec<StreamEvent> {
        let mut events = Vec::new();
        if let Some(thinking) = &self.thinking {
            events.push(StreamEvent::Thinking {
                text: thinking.clone(),
            });
        }
        if let Some(text) = &self.text {
            events.extend(text.split_inclusive(' ').map(|word| StreamEvent::Text {
                text: word.to_owned(),
            }));
        }
        for (index, call) in self.tool_uses.iter().enumerate() {
            let id = call
                .id
                .clone()
                .unwrap_or_else(|| format!("toolu_scripted_{number}_{}", index + 1));
            let name = encode_tool_name(&call.name).into_owned();
            events.push(StreamEvent::ToolCallStart {
                id: id.clone(),
                name: name.clone(),
            });
            events.push(StreamEvent::ToolCall {
                id,
                name,
                arguments: Value::Object(call.input.clone()).to_string(),
            });
        }
        if let Some(usage) = self.usage {
            events.push(StreamEvent::Usage(usage.usage()));
        }
        if let Some(message) = &self.error {
            events.push(StreamEvent::Error {
                message: message.clone(),
            });
        } else {
            let stop = if self.tool_uses.is_empty() {
                StopReason::EndTurn
            } else {
                StopReason::ToolUse
            };
            events.push(StreamEvent::Done { stop });
        }
        events
    }
}

/// The turns of a script's JSON: a list of turns, or `{"turns": [...]}`, each turn read on its
/// own so that an error names the turn and what a turn may hold.
fn script_turns(json: Value, path: &Path) -> Result<Vec<Turn>, ScriptError> {
    let shape = |found| ScriptError::Shape {
        path: path.to_owned(),
        found,
    };
    let list = match json {
        Value::Array(list) => list,
        Value::Object(mut object) => match object.remove("turns") {
            Some(Value::Array(list)) if object.is_empty() => list,
            Some(Value::Array(_)) => return Err(shape("an object with other keys than \"turns\"")),
            Some(_) => return Err(shape("\"turns\" that is not a list")),
            None => return Err(shape("an object without \"turns\"")),
        },
        Value::String(_) => return Err(shape("a string")),
        Value::Number(_) => return Err(shape("a number")),
        Value::Bool(_) => return Err(shape("a boolean")),
        Value::Null => return Err(shape("null")),
    };
    list.into_iter()
        .enumerate()
        .map(|(index, turn)| {
            Turn::deserialize(turn).map_err(|source| ScriptError::InvalidTurn {
                path: path.to_owned(),
                turn: index + 1,
                source,
            })
        })
        .collect()
}

/// Replays scripted responses, one turn per request, with no network, for tests, examples and
/// the offline quickstart. Requests are built as Anthropic bodies (model `scripted` unless the
/// options name one) and kept for inspection ([`requests`](Self::requests)).
///
/// A script is JSON: a list of turns (or `{"turns": [...]}`), one per request, in order.
/// A turn is either written out:
///
/// ```json
/// {"thinking": "optional", "text": "optional", "tool_uses": [{"name": "ls", "input": {"path": "."}, "id": "optional"}],
///  "usage": {"input_tokens": 10, "output_tokens": 5}, "delay_ms": 0}
/// ```
///
/// or a recorded SSE stream decoded by the matching decoder:
///
/// ```json
/// {"recording": "../fixtures/anthropic_tool_use_streaming.txt", "provider": "anthropic"}
/// ```
///
/// (`provider` is `anthropic`, `openai`, `openai-chat` or `vertex`; without it the file name's
/// prefix decides: `anthropic_`, `openai_`, `chat_completions_`, `vertex_`). A turn may also
/// be `{"error": "overloaded"}`: the stream reports that error. Relative recording paths
/// resolve against the script's directory. Tool uses without an `id` get
/// `toolu_scripted_<turn>_<n>` (1-based). `delay_ms` waits before each event (to watch a
/// spinner, or to cancel mid-stream in a test). A written-out turn tells no response id nor
/// model (no [`StreamEvent::Response`]); a recording tells what it recorded.
///
/// A request whose conversation holds the generated ids of turn `k` (a run stopped for an
/// approval, then run again in a new process) is answered from the turn after `k`: the
/// script resumes where the conversation is, and its ids never repeat.
///
/// ```
/// use flemma_providers::{ScriptedProvider, Turn};
/// use serde_json::json;
///
/// let provider = ScriptedProvider::new([
///     Turn::text("Let me look.").with_tool_use("ls", json!({"path": "."})),
///     Turn::text("Done."),
/// ]);
/// assert_eq!(provider.remaining(), 2);
/// let from_json = ScriptedProvider::from_json(r#"[{"text": "Hi!"}]"#, ".")?;
/// assert_eq!(from_json.remaining(), 1);
/// # Ok::<(), flemma_providers::ScriptError>(())
/// ```
#[derive(Debug)]
pub struct ScriptedProvider {
    base: PathBuf,
    total: usize,
    state: Mutex<Replay>,
}

#[derive(Debug)]
struct Replay {
    turns: VecDeque<Turn>,
    served: usize,
    requests: Vec<String>,
}

impl ScriptedProvider {
    /// A provider replaying `turns`; relative recording paths resolve against the working
    /// directory.
    pub fn new(turns: impl IntoIterator<Item = Turn>) -> Self {
        Self::with_base(turns.into_iter().collect(), PathBuf::new())
    }

    fn with_base(turns: VecDeque<Turn>, base: PathBuf) -> Self {
        Self {
            base,
            total: turns.len(),
            state: Mutex::new(Replay {
                turns,
                served: 0,
                requests: Vec::new(),
            }),
        }
    }

    /// A provider replaying the script in `json`; relative recording paths resolve against
    /// `base`.
    ///
    /// # Errors
    ///
    /// [`ScriptError::Parse`], [`ScriptError::Shape`], [`ScriptError::InvalidTurn`] (with the
    /// path `<inline>`) and [`ScriptError::Turn`].
    pub fn from_json(json: &str, base: impl Into<PathBuf>) -> Result<Self, ScriptError> {
        Self::parse(json, Path::new("<inline>"), base.into())
    }

    /// A provider replaying the script file at `path`.
    ///
    /// # Errors
    ///
    /// [`ScriptError::Read`], [`ScriptError::Parse`], [`ScriptError::Shape`],
    /// [`ScriptError::InvalidTurn`] and [`ScriptError::Turn`].
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, ScriptError> {
        let path = path.as_ref();
        let json = std::fs::read_to_string(path).map_err(|source| ScriptError::Read {
            path: path.to_owned(),
            source,
        })?;
        let base = path.parent().map(Path::to_owned).unwrap_or_default();
        Self::parse(&json, path, base)
    }

    fn parse(json: &str, path: &Path, base: PathBuf) -> Result<Self, ScriptError> {
        let json: Value = serde_json::from_str(json).map_err(|source| ScriptError::Parse {
            path: path.to_owned(),
            source,
        })?;
        let turns = script_turns(json, path)?;
        for (index, turn) in turns.iter().enumerate() {
            turn.check(index + 1)?;
        }
        Ok(Self::with_base(turns.into(), base))
    }

    fn replay(&self) -> std::sync::MutexGuard<'_, Replay> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Turns not yet served.
    pub fn remaining(&self) -> usize {
        self.replay().turns.len()
    }

    /// The bodies of the requests received so far, in order.
    pub fn requests(&self) -> Vec<String> {
        self.replay().requests.clone()
    }

    /// The events of a recorded turn, decoded in 61-byte chunks (any chunking decodes alike).
    fn recorded(&self, turn: &Turn, path: &Path) -> Result<Vec<StreamEvent>, ReplayError> {
        let path = self.base.join(path);
        let bytes = std::fs::read(&path).map_err(|source| ReplayError::Recording {
            path: path.clone(),
            source,
        })?;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let kind = turn
            .provider
            .as_deref()
            .and_then(ProviderKind::from_name)
            .unwrap_or_else(|| kind_of_file(&name));
        let mut decoder: Box<dyn crate::StreamDecoder> = match kind {
            ProviderKind::Vertex => {
                let mut calls = 0u32;
                Box::new(VertexDecoder::with_id_source(move |name: &str| {
                    calls += 1;
                    format!("urn:flemma:tool:{name}:scripted{calls:04}")
                }))
            }
            other => other.decoder(),
        };
        let mut sse = SseDecoder::new();
        let mut events = Vec::new();
        for chunk in bytes.chunks(61) {
            for event in sse.feed(chunk) {
                events.extend(decoder.decode(&event));
            }
        }
        if let Some(event) = sse.finish() {
            events.extend(decoder.decode(&event));
        }
        events.extend(decoder.finish());
        Ok(events)
    }
}

/// The highest turn whose generated ids (`toolu_scripted_<turn>_<n>`) the request's
/// `tool_use` blocks hold: the turns of the script the conversation already went through.
fn answered_turns(body: &str) -> usize {
    let Ok(body) = serde_json::from_str::<Value>(body) else {
        return 0;
    };
    let Some(messages) = body.get("messages").and_then(Value::as_array) else {
        return 0;
    };
    messages
        .iter()
        .filter_map(|m| m.get("content").and_then(Value::as_array))
        .flatten()
        .filter(|block| block.get("type").and_then(Value::as_str) == Some("tool_use"))
        .filter_map(|block| block.get("id").and_then(Value::as_str))
        .filter_map(|id| {
            let (turn, n) = id.strip_prefix("toolu_scripted_")?.split_once('_')?;
            n.parse::<usize>().ok()?;
            turn.parse::<usize>().ok()
        })
        .max()
        .unwrap_or(0)
}

/// A recording's provider from its file name.
fn kind_of_file(name: &str) -> ProviderKind {
    if name.starts_with("openai_") {
        ProviderKind::OpenAiResponses
    } else if name.starts_with("chat_completions_") {
        ProviderKind::OpenAiChat
    } else if name.starts_with("vertex_") {
        ProviderKind::Vertex
    } else {
        ProviderKind::Anthropic
    }
}

#[async_trait::async_trait]
impl Provider for ScriptedProvider {
    fn name(&self) -> &'static str {
        "scripted"
    }

    fn request_options(&self, options: &Options) -> RequestOptions {
        let mut request = RequestOptions::from_options(options, ProviderKind::Anthropic);
        if options.model.is_none() {
            "scripted".clone_into(&mut request.model);
        }
        request
    }

    fn build_request(&self, prompt: &Prompt<'_>, options: &RequestOptions) -> Request {
        Request {
            body: ProviderKind::Anthropic.request(prompt, options).to_json(),
        }
    }

    async fn stream(&self, request: Request) -> Result<EventStream, SendError> {
        let answered = answered_turns(&request.body);
        let (turn, number) = {
            let mut replay = self.replay();
            // A conversation that holds the calls of turns this script served in an earlier
            // process (run, `flemma approve`, run again) resumes after them, so that its ids
            // never repeat.
            while replay.served < answered && replay.turns.pop_front().is_some() {
                replay.served += 1;
            }
            replay.requests.push(request.body);
            let turn = replay
                .turns
                .pop_front()
                .ok_or(ReplayError::Exhausted { turns: self.total })?;
            replay.served += 1;
            (turn, replay.served)
        };
        let events = match &turn.recording {
            Some(path) => self.recorded(&turn, path)?,
            None => turn.events(number),
        };
        if turn.delay_ms == 0 {
            return Ok(EventStream::from_events(events));
        }
        let delay = Duration::from_millis(turn.delay_ms);
        Ok(EventStream::new(futures_util::stream::unfold(
            events.into_iter(),
            move |mut events| async move {
                let event = events.next()?;
                tokio::time::sleep(delay).await;
                Some((event, events))
            },
        )))
    }
}

#[cfg(test)]
mod tests;

//! Compaction: the older part of a long conversation summarised into a `**Compaction:**`
//! block, written into the `.chat` where a person reads it.
//!
//! The block is a `@You:` message of its own inserted before the first message kept verbatim
//! ([`flemma_ast::writer::insert_compaction`]). Nothing is removed: the messages above it stay
//! in the file and are no longer sent (the prompt builder starts at
//! [`Document::compacted_at`]); deleting the block sends them again.
//!
//! Where the cut goes ([`find_cut`]): after the last summary (a conversation is compacted
//! again from its last block on), before a model's response or a message of the user's own
//! text, never between a call and its result (every tool use above the cut has its final
//! result above it: a pending call or one waiting for approval keeps everything from its
//! response on), never above a background job still running, and with the latest
//! `compaction.keep_turns` responses below it.
//!
//! When ([`estimate_tokens`]): before a request whose estimated size passes
//! `compaction.threshold` of the model's context window (the model table's). The estimate is
//! about four characters a token over what is sent (the system prompt, the messages from the
//! last compaction on, the tools' definitions), or the input the previous request reported,
//! when that is more.
//!
//! ```
//! use flemma_runtime::compaction::find_cut;
//!
//! let doc = flemma_ast::parse(
//!     "@You:\nBuild it.\n\n@Assistant:\nPlan A.\n\n@You:\nGo on.\n\n@Assistant:\nDone A.\n\n\
//!      @You:\nNow B.\n\n@Assistant:\nDone B.\n\n@You:\nThanks\n",
//! );
//! let cut = find_cut(&doc, 1).expect("something to compact");
//! // The last response (and the user's message before it) stay.
//! assert_eq!((cut.from, cut.before, cut.messages), (0, 4, 4));
//! assert!(find_cut(&doc, 3).is_none(), "three responses kept leaves one message to summarise");
//! ```

use std::collections::HashSet;

use flemma_ast::{Document, Message, Role, Segment};
use flemma_schema::ToolSpec;
use serde::Serialize;

use crate::hooks::CompactTrigger;

/// What the summary request asks of the model, after the conversation it summarises.
pub const SUMMARY_INSTRUCTIONS: &str = "The messages above are about to be replaced by a summary \
of them: the conversation will go on from your summary alone. Write that summary now, for \
yourself, in plain text. Keep what the user asked for and every requirement, constraint and \
preference they stated; what has been done (files read or changed, with their paths; commands \
run and what they showed; decisions taken and why); errors met and how they were solved; what \
is left to do and the next step. Leave out what no longer matters. Call no tool: answer with \
the summary only.";

/// What a compaction summarises: the messages `from..before` of a document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cut {
    /// The first message summarised: the last compaction's message, or 0.
    pub from: usize,
    /// The first message kept verbatim: the compaction's message goes before it.
    pub before: usize,
    /// How many `@You:` and `@Assistant:` messages the summary stands for (the last
    /// compaction's message, summarised again, not counted).
    pub messages: u64,
    /// About how many tokens they take in a request.
    pub tokens: u64,
}

/// A compaction written into the conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Compacted {
    /// What started it.
    pub trigger: CompactTrigger,
    /// How many messages the summary stands for.
    pub messages: u64,
    /// About how many tokens they took in a request.
    pub tokens: u64,
    /// About how many tokens the summary takes (what the provider counted, when it did).
    pub summary_tokens: u64,
    /// The line of the `@You:` marker of the compaction's message.
    pub line: u32,
}

/// How a compaction ended when it wrote nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CompactOutcome {
    /// The block was written.
    Compacted(Compacted),
    /// Nothing can be summarised: too few messages above the turns kept, or a pending call
    /// or a running job where the cut would go.
    NothingToCompact,
    /// A `PreCompact` hook cancelled it.
    Cancelled {
        /// The hook.
        hook: String,
        /// Why.
        reason: String,
    },
}

/// Characters to tokens, about four to one, rounded up.
fn tokens_of(chars: usize) -> u64 {
    (chars as u64).div_ceil(4)
}

/// The characters of what a message sends.
fn message_chars(message: &Message) -> usize {
    message
        .segments
        .iter()
        .map(|segment| match segment {
            Segment::Text(t) => t.value.len(),
            Segment::Expression(t) | Segment::Code(t) => t.code.len() + 4,
            Segment::Thinking(t) => t.content.len(),
            Segment::ToolUse(t) => {
                t.name.as_str().len() + t.id.as_str().len() + t.raw_input().len()
            }
            Segment::ToolResult(t) => t.tool_use_id.as_str().len() + t.content.len(),
            Segment::JobResult(t) => t.job_id.as_str().len() + t.content.len(),
            Segment::Compaction(t) => t.content.len(),
            _ => 0,
        })
        .sum()
}

/// Whether the compaction's message may go right before `message`: a model's response, or a
/// message of the user's own (no result in it: a result cut from its call would be sent
/// alone).
fn may_follow_cut(message: &Message) -> bool {
    match message.role {
        Role::Assistant => true,
        Role::You => {
            message.tool_results().next().is_none()
                && message.job_results().next().is_none()
                && message.compaction().is_none()
        }
        _ => false,
    }
}

/// Where a compaction of `doc` keeping its latest `keep_turns` responses verbatim goes: the
/// latest cut that summarises at least two messages (see the module's page for the rules);
/// `None` when there is none.
pub fn find_cut(doc: &Document, keep_turns: u32) -> Option<Cut> {
    let messages = &doc.messages;
    let from = doc.compacted_at().unwrap_or(0);
    let delivered: HashSet<&str> = messages
        .iter()
        .flat_map(Message::job_results)
        .map(|j| j.job_id.as_str())
        .collect();
    // Responses at or after each message.
    let mut responses = vec![0u32; messages.len() + 1];
    for (i, message) in messages.iter().enumerate().rev() {
        responses[i] = responses[i + 1] + u32::from(message.role == Role::Assistant);
    }
    let mut open: HashSet<&str> = HashSet::new();
    let mut job_running = false;
    let (mut counted, mut chars) = (0u64, 0usize);
    // The cut and what is above it: (before, messages, characters).
    let mut best: Option<(usize, u64, usize)> = None;
    for (k, message) in messages.iter().enumerate().skip(from) {
        if counted >= 2
            && open.is_empty()
            && !job_running
            && responses[k] >= keep_turns
            && may_follow_cut(message)
        {
            best = Some((k, counted, chars));
        }
        for segment in &message.segments {
            match segment {
                Segment::ToolUse(u) => {
                    open.insert(u.id.as_str());
                }
                Segment::ToolResult(r) if r.is_final() => {
                    open.remove(r.tool_use_id.as_str());
                    if r.job_id().is_some_and(|job| !delivered.contains(job)) {
                        job_running = true;
                    }
                }
                _ => {}
            }
        }
        if matches!(message.role, Role::You | Role::Assistant) {
            // The last summary is summarised again, but does not count as a message.
            counted += u64::from(k != from || message.compaction().is_none());
            chars += message_chars(message);
        }
    }
    let (mut before, mut counted, mut chars) = best?;
    // A response kept with the user's message that asked for it.
    let asked = &messages[before - 1];
    if messages[before].role == Role::Assistant
        && asked.role == Role::You
        && may_follow_cut(asked)
        && before - 1 > from
        && counted > 2
    {
        before -= 1;
        counted -= 1;
        chars -= message_chars(asked);
    }
    Some(Cut {
        from,
        before,
        messages: counted,
        tokens: tokens_of(chars),
    })
}

/// About how many tokens the next request of `doc` takes with `tools` offered: a quarter of
/// the characters of its system prompt, of its messages from the last compaction on and of the
/// tools' definitions.
///
/// ```
/// let doc = flemma_ast::parse(&format!("@You:\n{}\n", "word ".repeat(800)));
/// assert_eq!(flemma_runtime::compaction::estimate_tokens(&doc, &[]), 1000);
/// ```
pub fn estimate_tokens(doc: &Document, tools: &[ToolSpec]) -> u64 {
    let from = doc.compacted_at().unwrap_or(0);
    let mut chars = 0;
    if let Some(system) = doc.messages.iter().rfind(|m| m.role == Role::System) {
        chars += message_chars(system);
    }
    chars += doc.messages[from..]
        .iter()
        .filter(|m| matches!(m.role, Role::You | Role::Assistant))
        .map(message_chars)
        .sum::<usize>();
    chars += tools
        .iter()
        .map(|t| t.name.as_str().len() + t.description.len() + t.input_schema.to_string().len())
        .sum::<usize>();
    tokens_of(chars)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cut(text: &str, keep: u32) -> Option<(usize, usize)> {
        find_cut(&flemma_ast::parse(text), keep).map(|c| (c.from, c.before))
    }

    const USE: &str = "**Tool Use:** `bash` (`t1`)\n```json\n{\"command\":\"ls\"}\n```";

    #[test]
    fn a_pending_call_keeps_everything_from_its_response_on() {
        let text = format!(
            "@You:\nGo.\n\n@Assistant:\nA\n\n@You:\nMore.\n\n@Assistant:\n{USE}\n\n\
             @You:\n**Tool Result:** `t1` (pending)\n```\n```\n\n@Assistant:\nB\n\n@You:\nC\n"
        );
        // Without the pending call the cut could go before the last response; with it, it
        // goes before the response that made the call (with the user's message that asked).
        assert_eq!(cut(&text, 0), Some((0, 2)));
    }

    #[test]
    fn a_running_job_keeps_everything_from_its_call_on() {
        let start = format!(
            "@You:\nGo.\n\n@Assistant:\nA\n\n@You:\nMore.\n\n@Assistant:\n{USE}\n\n\
             @You:\n**Tool Result:** `t1` (job=job_1)\n```\nstarted\n```\n\n@Assistant:\nB\n\n@You:\nC\n"
        );
        assert_eq!(cut(&start, 0), Some((0, 2)));
        let delivered = format!("{start}\n**Job Result:** `job_1`\n```\ndone\n```\n");
        assert_eq!(cut(&delivered, 0), Some((0, 5)));
    }

    #[test]
    fn never_between_a_call_and_its_result() {
        let text = format!(
            "@You:\nGo.\n\n@Assistant:\n{USE}\n\n@You:\n**Tool Result:** `t1`\n```\nok\n```\n\n\
             @Assistant:\nDone.\n\n@You:\nThanks\n"
        );
        // Before message 2 (the results) is never a cut.
        assert_eq!(cut(&text, 1), Some((0, 3)));
        assert_eq!(cut(&text, 2), None);
    }

    #[test]
    fn compacted_again_from_the_last_block_on() {
        let text = "@You:\nOld\n\n@Assistant:\nOld answer\n\n\
                    @You:\n**Compaction:**\n```\nsummary\n```\n\n@Assistant:\nA\n\n@You:\nB\n\n\
                    @Assistant:\nC\n\n@You:\nD\n";
        assert_eq!(cut(text, 1), Some((2, 5)));
        let doc = flemma_ast::parse(text);
        let all = estimate_tokens(
            &flemma_ast::parse(&text.replace("**Compaction:**", "x")),
            &[],
        );
        assert!(estimate_tokens(&doc, &[]) < all);
    }
}

//! Tool names on the wire.

use std::borrow::Cow;

/// A tool name as providers accept it: each `.` (and the legacy `:`) becomes `__`.
///
/// Borrows when there is nothing to replace, so the common case allocates nothing.
///
/// ```
/// assert_eq!(flemma_ids::encode_tool_name("flemma.jobs.status"), "flemma__jobs__status");
/// assert_eq!(flemma_ids::encode_tool_name("slack:channels_list"), "slack__channels_list");
/// assert!(matches!(flemma_ids::encode_tool_name("bash"), std::borrow::Cow::Borrowed(_)));
/// ```
pub fn encode_tool_name(name: &str) -> Cow<'_, str> {
    if name.contains(['.', ':']) {
        Cow::Owned(name.replace(['.', ':'], "__"))
    } else {
        Cow::Borrowed(name)
    }
}

/// A wire name back to the tool name: each `__` becomes `.`.
///
/// ```
/// assert_eq!(flemma_ids::decode_tool_name("slack__channels_list"), "slack.channels_list");
/// ```
pub fn decode_tool_name(wire: &str) -> Cow<'_, str> {
    if wire.contains("__") {
        Cow::Owned(wire.replace("__", "."))
    } else {
        Cow::Borrowed(wire)
    }
}

//! A server's tool annotations as [`ToolHints`].

use rmcp::model::ToolAnnotations;

/// The behaviour hints an MCP server sent with a tool (its `annotations`): each is `None`
/// when the server did not send it. They are the server's claims, not facts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct ToolHints {
    /// `readOnlyHint`: the tool does not modify its environment.
    pub read_only: Option<bool>,
    /// `destructiveHint`: the tool may perform destructive updates.
    pub destructive: Option<bool>,
    /// `idempotentHint`: calling it again with the same arguments has no further effect.
    pub idempotent: Option<bool>,
    /// `openWorldHint`: the tool interacts with an open world of external entities.
    pub open_world: Option<bool>,
}

impl From<&ToolAnnotations> for ToolHints {
    fn from(annotations: &ToolAnnotations) -> Self {
        Self {
            read_only: annotations.read_only_hint,
            destructive: annotations.destructive_hint,
            idempotent: annotations.idempotent_hint,
            open_world: annotations.open_world_hint,
        }
    }
}

impl From<ToolAnnotations> for ToolHints {
    fn from(annotations: ToolAnnotations) -> Self {
        Self::from(&annotations)
    }
}

impl ToolHints {
    /// The hints the server sent, as the wire names them, in the order readOnly,
    /// destructive, idempotent, openWorld; `no hints` when it sent none.
    ///
    /// ```
    /// use flemma_mcp::ToolHints;
    /// use rmcp::model::ToolAnnotations;
    ///
    /// let hints = ToolHints::from(ToolAnnotations::new().destructive(false).read_only(true));
    /// assert_eq!(hints.describe(), "readOnlyHint: true, destructiveHint: false");
    /// assert_eq!(ToolHints::default().describe(), "no hints");
    /// ```
    pub fn describe(&self) -> String {
        let parts: Vec<String> = [
            ("readOnlyHint", self.read_only),
            ("destructiveHint", self.destructive),
            ("idempotentHint", self.idempotent),
            ("openWorldHint", self.open_world),
        ]
        .into_iter()
        .filter_map(|(name, value)| value.map(|v| format!("{name}: {v}")))
        .collect();
        if parts.is_empty() {
            "no hints".to_owned()
        } else {
            parts.join(", ")
        }
    }

    /// `readOnlyHint: true` without `destructiveHint: true`.
    pub fn is_read_only(&self) -> bool {
        self.read_only == Some(true) && self.destructive != Some(true)
    }

    /// `destructiveHint: true` without `readOnlyHint: true`.
    pub fn is_destructive(&self) -> bool {
        self.destructive == Some(true) && self.read_only != Some(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describe_names_only_the_hints_sent_in_order() {
        let all = ToolHints::from(
            ToolAnnotations::new()
                .open_world(true)
                .idempotent(false)
                .destructive(true)
                .read_only(false),
        );
        assert_eq!(
            all.describe(),
            "readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true"
        );
        let some = ToolHints::from(ToolAnnotations::with_title("T").idempotent(true));
        assert_eq!(some.describe(), "idempotentHint: true");
        assert_eq!(ToolHints::default().describe(), "no hints");
    }

    #[test]
    fn read_only_and_destructive_exclude_each_other() {
        let hints = |r, d| ToolHints {
            read_only: r,
            destructive: d,
            ..ToolHints::default()
        };
        assert!(hints(Some(true), None).is_read_only());
        assert!(hints(Some(true), Some(false)).is_read_only());
        assert!(!hints(Some(true), Some(true)).is_read_only());
        assert!(!hints(Some(true), Some(true)).is_destructive());
        assert!(hints(None, Some(true)).is_destructive());
        assert!(hints(Some(false), Some(true)).is_destructive());
        // An unannotated tool is neither (rmcp's `is_destructive` defaults to true; flemma
        // follows the ordinary rules instead).
        assert!(!hints(None, None).is_read_only());
        assert!(!hints(None, None).is_destructive());
    }
}

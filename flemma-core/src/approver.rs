//! [`Approver`]: who answers a call that waits for approval, and [`approver_fn`] for a
//! closure. The runtime's executor asks it about each pending call.

use std::sync::Arc;

use flemma_ids::{ToolName, ToolUseId};
use serde_json::Value;

/// What the host's [`Approver`] answers for a pending call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Run it.
    Approve,
    /// Do not run it. A reason reaches the model as `User feedback: <reason>`
    /// (`flemma_runtime::rejection_feedback`); without one (or a blank one) it
    /// reads `This tool has been rejected by the user.`
    Reject(Option<String>),
}

/// A call waiting for a human decision, as shown to an [`Approver`].
#[derive(Debug, Clone)]
pub struct PendingCall {
    /// The call id.
    pub id: ToolUseId,
    /// The tool.
    pub tool: ToolName,
    /// The input, as the model wrote it.
    pub input: Value,
    /// The rendered preview (`bash: $ rm -rf build — cleaning`).
    pub preview: String,
}

/// Decides pending calls for the host: a dialog, a chat message to a reviewer, a policy
/// service. Without one, pending calls wait in the transcript until a user approves them.
///
/// ```
/// use async_trait::async_trait;
/// use flemma_core::{Answer, Approver, PendingCall};
///
/// struct NoDeletes;
///
/// #[async_trait]
/// impl Approver for NoDeletes {
///     async fn ask(&self, call: &PendingCall) -> Answer {
///         if call.input["command"].as_str().is_some_and(|c| c.contains("rm ")) {
///             Answer::Reject(Some("No deletions from this chat.".into()))
///         } else {
///             Answer::Approve
///         }
///     }
/// }
/// ```
#[async_trait::async_trait]
pub trait Approver: Send + Sync {
    /// Decides one pending call.
    async fn ask(&self, call: &PendingCall) -> Answer;
}

/// An approver made of a synchronous closure; see [`approver_fn`].
pub struct FnApprover<F>(F);

impl<F> std::fmt::Debug for FnApprover<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FnApprover(..)")
    }
}

#[async_trait::async_trait]
impl<F> Approver for FnApprover<F>
where
    F: Fn(&PendingCall) -> Answer + Send + Sync,
{
    async fn ask(&self, call: &PendingCall) -> Answer {
        (self.0)(call)
    }
}

/// An [`Approver`] from a synchronous closure answering each pending call, beside
/// [`tool_fn`](crate::tool_fn) and `flemma_approval::resolver_fn`.
///
/// ```
/// use flemma_core::{Answer, Approver, PendingCall, approver_fn};
///
/// let no_deletes = approver_fn(|call: &PendingCall| {
///     if call.input["command"].as_str().is_some_and(|c| c.contains("rm ")) {
///         Answer::Reject(Some("No deletions from this chat.".into()))
///     } else {
///         Answer::Approve
///     }
/// });
/// let call = PendingCall {
///     id: "toolu_1".parse()?,
///     tool: flemma_ids::ToolName::new("bash")?,
///     input: serde_json::json!({"command": "rm -rf build"}),
///     preview: "bash: $ rm -rf build".into(),
/// };
/// let runtime = tokio::runtime::Builder::new_current_thread().build()?;
/// assert_eq!(
///     runtime.block_on(no_deletes.ask(&call)),
///     Answer::Reject(Some("No deletions from this chat.".into()))
/// );
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn approver_fn<F>(f: F) -> FnApprover<F>
where
    F: Fn(&PendingCall) -> Answer + Send + Sync,
{
    FnApprover(f)
}

/// An `Arc<T>` or a `Box<T>` of an [`Approver`] (`T` may be unsized, `dyn Approver`
/// included) is an approver too, so a host can keep a handle on what it passes.
macro_rules! shared_approver {
    ($ptr:ident) => {
        #[async_trait::async_trait]
        impl<T: Approver + ?Sized> Approver for $ptr<T> {
            async fn ask(&self, call: &PendingCall) -> Answer {
                (**self).ask(call).await
            }
        }
    };
}

shared_approver!(Arc);
shared_approver!(Box);

#[cfg(test)]
mod tests {
    use super::*;

    fn call(command: &str) -> PendingCall {
        PendingCall {
            id: "toolu_1".parse().unwrap(),
            tool: flemma_ids::ToolName::new("bash").unwrap(),
            input: serde_json::json!({ "command": command }),
            preview: format!("bash: $ {command}"),
        }
    }

    #[tokio::test]
    async fn approver_fn_answers_with_the_closure_and_shares_as_arc_and_box() {
        let approver = approver_fn(|call: &PendingCall| {
            if call.preview.contains("rm") {
                Answer::Reject(None)
            } else {
                Answer::Approve
            }
        });
        assert_eq!(approver.ask(&call("ls")).await, Answer::Approve);
        assert_eq!(approver.ask(&call("rm x")).await, Answer::Reject(None));
        let shared: Arc<dyn Approver> = Arc::new(approver);
        assert_eq!(shared.ask(&call("rm x")).await, Answer::Reject(None));
        let boxed: Box<Arc<dyn Approver>> = Box::new(shared);
        assert_eq!(boxed.ask(&call("ls")).await, Answer::Approve);
    }
}

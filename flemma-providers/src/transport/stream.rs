//! Streamed response bodies, and the pipe from a request to its events.

use std::fmt;
use std::future::Future;
use std::pin::{Pin, pin};
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::future::Either;
use futures_util::{Stream, StreamExt};

use super::{ChunkStream, Endpoint, HttpError, HttpTransport, Timeout, TransportError};
use crate::event::{StreamDecoder, StreamEvent};
use crate::sse::SseDecoder;

/// The body of a successful response, as chunks of bytes. Dropping it closes the connection.
///
/// When no chunk arrives for the transport's `idle_timeout`, the stream yields a
/// [`TransportError::Timeout`] of [`Timeout::Idle`] and ends.
pub struct ResponseStream {
    /// The first chunk, read before the stream was handed out.
    pub(super) first: Option<Vec<u8>>,
    pub(super) inner: ChunkStream,
    pub(super) idle: Duration,
    pub(super) timer: Pin<Box<tokio::time::Sleep>>,
    pub(super) done: bool,
}

impl fmt::Debug for ResponseStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseStream").finish_non_exhaustive()
    }
}

impl Stream for ResponseStream {
    type Item = Result<Vec<u8>, TransportError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.done {
            return Poll::Ready(None);
        }
        let idle = self.idle;
        if let Some(first) = self.first.take() {
            self.timer
                .as_mut()
                .reset(tokio::time::Instant::now() + idle);
            return Poll::Ready(Some(Ok(first)));
        }
        match self.inner.as_mut().poll_next(cx) {
            Poll::Ready(Some(Ok(chunk))) => {
                self.timer
                    .as_mut()
                    .reset(tokio::time::Instant::now() + idle);
                Poll::Ready(Some(Ok(chunk)))
            }
            Poll::Ready(Some(Err(e))) => {
                self.done = true;
                Poll::Ready(Some(Err(TransportError::Stream(HttpError(e)))))
            }
            Poll::Ready(None) => {
                self.done = true;
                Poll::Ready(None)
            }
            Poll::Pending => match self.timer.as_mut().poll(cx) {
                Poll::Ready(()) => {
                    self.done = true;
                    Poll::Ready(Some(Err(TransportError::Timeout {
                        timeout: Timeout::Idle(idle),
                        attempts: 1,
                    })))
                }
                Poll::Pending => Poll::Pending,
            },
        }
    }
}

/// Sends `body` to `endpoint` and decodes the streamed response with the provider's decoder;
/// returns every event, ending with what the decoder's `finish` reports.
///
/// # Errors
///
/// As [`HttpTransport::post_stream`]. A stream that breaks after the response began is not
/// an error here: an [`StreamEvent::Error`] describes it, then the decoder finishes (which
/// drops unfinished tool calls).
pub async fn stream_events(
    transport: &HttpTransport,
    endpoint: &Endpoint,
    body: String,
) -> Result<Vec<StreamEvent>, TransportError> {
    let mut decoder = endpoint.kind().decoder();
    let mut events = Vec::new();
    stream_events_with(transport, endpoint, body, decoder.as_mut(), |e| {
        events.push(e);
    })
    .await?;
    Ok(events)
}

/// [`stream_events`] with a given decoder, handing each event to `on_event` as it arrives.
///
/// # Errors
///
/// As [`stream_events`].
pub async fn stream_events_with(
    transport: &HttpTransport,
    endpoint: &Endpoint,
    body: String,
    decoder: &mut dyn StreamDecoder,
    mut on_event: impl FnMut(StreamEvent),
) -> Result<(), TransportError> {
    let mut stream = transport.post_stream(endpoint, body).await?;
    let mut sse = SseDecoder::new();
    while let Some(chunk) = stream.next().await {
        match chunk {
            Ok(bytes) => {
                for event in sse.feed(&bytes) {
                    decoder.decode(&event).into_iter().for_each(&mut on_event);
                }
            }
            Err(e) => {
                on_event(StreamEvent::Error {
                    message: flemma_ids::error_chain(&e),
                });
                break;
            }
        }
    }
    if let Some(event) = sse.finish() {
        decoder.decode(&event).into_iter().for_each(&mut on_event);
    }
    decoder.finish().into_iter().for_each(&mut on_event);
    Ok(())
}

/// Races `call` against `cancel`: when `cancel` completes first, `call` is dropped (closing
/// its connection) and the result is [`TransportError::Cancelled`].
///
/// # Errors
///
/// [`TransportError::Cancelled`], or the error of `call`.
pub async fn with_cancel<T>(
    call: impl Future<Output = Result<T, TransportError>>,
    cancel: impl Future<Output = ()>,
) -> Result<T, TransportError> {
    match futures_util::future::select(pin!(call), pin!(cancel)).await {
        Either::Left((result, _)) => result,
        Either::Right(((), _)) => Err(TransportError::Cancelled),
    }
}

//! One event stream, fanned out to every subscriber (the executor's [`Event`](crate::Event)s,
//! the session's events of the `flemma` crate).
//!
//! Each subscriber has a queue of its own, so a slow one never makes another miss anything.
//! A queue holds up to its capacity ([`DEFAULT_CAPACITY`] unless the builder says otherwise);
//! a subscriber that falls that far behind misses the events that do not fit, and reads one
//! [`Missed`] in their place, with their count, where they would have been. Memory is bounded
//! even under a hostile burst (a transcript of thousands of calls, a stalled UI): at most
//! `capacity` events per subscriber. Nothing else is ever dropped; a queue that never fills
//! sees every event, in order.
//!
//! ```
//! use flemma_runtime::fanout::{Fanout, Missed};
//!
//! #[derive(Debug, Clone, PartialEq)]
//! enum Note { Text(u32), Missed(u64) }
//! impl From<Missed> for Note {
//!     fn from(missed: Missed) -> Self { Note::Missed(missed.count) }
//! }
//!
//! let fanout = Fanout::new(2);
//! let mut events = fanout.subscribe();
//! for n in 0..5 {
//!     fanout.emit(Note::Text(n));
//! }
//! fanout.emit(Note::Text(9)); // still full: counted as missed too
//! assert_eq!(events.try_recv(), Some(Note::Text(0)));
//! assert_eq!(events.try_recv(), Some(Note::Text(1)));
//! assert_eq!(events.try_recv(), Some(Note::Missed(4)));
//! assert_eq!(events.try_recv(), None);
//! ```

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};

/// How many events a subscriber's queue holds by default before it misses some (65,536).
pub const DEFAULT_CAPACITY: usize = 65_536;

/// Events a subscriber missed because its queue was full; read where they would have been.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Missed {
    /// How many.
    pub count: u64,
}

/// A function that sees every event as it is emitted (see [`Fanout::forward`]).
pub type Forward<T> = Arc<dyn Fn(&T) + Send + Sync>;

/// The sending side: every subscriber's queue, and the functions events are forwarded to.
pub struct Fanout<T> {
    capacity: usize,
    inner: Mutex<Targets<T>>,
}

struct Targets<T> {
    queues: Vec<Arc<Queue<T>>>,
    forwards: Vec<Forward<T>>,
}

impl<T> std::fmt::Debug for Fanout<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let targets = self.lock();
        f.debug_struct("Fanout")
            .field("capacity", &self.capacity)
            .field("subscribers", &targets.queues.len())
            .field("forwards", &targets.forwards.len())
            .finish_non_exhaustive()
    }
}

impl<T: Clone + From<Missed>> Fanout<T> {
    /// A fanout whose subscribers hold up to `capacity` events each (at least 1).
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            inner: Mutex::new(Targets {
                queues: Vec::new(),
                forwards: Vec::new(),
            }),
        }
    }

    /// A new subscriber: it reads every event emitted from now on.
    pub fn subscribe(&self) -> Subscription<T> {
        let queue = Arc::new(Queue {
            state: Mutex::new(State {
                items: VecDeque::new(),
                events: 0,
                waker: None,
                closed: false,
            }),
        });
        self.lock().queues.push(Arc::clone(&queue));
        Subscription { queue }
    }

    /// Calls `forward` with every event from now on, as it is emitted, in order, before the
    /// emitter goes on (nothing is queued, nothing is missed). It runs under the fanout's lock:
    /// it must be quick and must not emit into this fanout.
    pub fn forward(&self, forward: Forward<T>) {
        self.lock().forwards.push(forward);
    }

    /// Sends `event` to every subscriber and forward; subscribers that went away are forgotten.
    pub fn emit(&self, event: T) {
        let mut wake = Vec::new();
        {
            let mut targets = self.lock();
            for forward in &targets.forwards {
                forward(&event);
            }
            // Only this fanout holds a queue whose subscription was dropped.
            targets.queues.retain(|q| Arc::strong_count(q) > 1);
            if let Some((last, others)) = targets.queues.split_last() {
                for queue in others {
                    let mut state = queue.lock();
                    state.push(event.clone(), self.capacity);
                    wake.extend(state.waker.take());
                }
                let mut state = last.lock();
                state.push(event, self.capacity);
                wake.extend(state.waker.take());
            }
        }
        for waker in wake {
            waker.wake();
        }
    }
}

impl<T> Fanout<T> {
    fn lock(&self) -> MutexGuard<'_, Targets<T>> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<T> Drop for Fanout<T> {
    fn drop(&mut self) {
        let targets = self.inner.get_mut().unwrap_or_else(PoisonError::into_inner);
        for queue in targets.queues.drain(..) {
            let waker = {
                let mut state = queue.lock();
                state.closed = true;
                state.waker.take()
            };
            if let Some(waker) = waker {
                waker.wake();
            }
        }
    }
}

struct Queue<T> {
    state: Mutex<State<T>>,
}

impl<T> Queue<T> {
    fn lock(&self) -> MutexGuard<'_, State<T>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

struct State<T> {
    items: VecDeque<Slot<T>>,
    /// How many of `items` are events (the rest count missed ones).
    events: usize,
    waker: Option<Waker>,
    /// The fanout is gone: no more events will come.
    closed: bool,
}

enum Slot<T> {
    Event(T),
    Missed(u64),
}

impl<T> State<T> {
    /// Queues `event`, or counts it as missed when `capacity` events are queued. A full
    /// queue ends with one `Missed` slot that counts every event since (each such slot
    /// follows an event, so a queue holds at most `2 * capacity + 1` slots).
    fn push(&mut self, event: T, capacity: usize) {
        if self.events < capacity {
            self.items.push_back(Slot::Event(event));
            self.events += 1;
        } else if let Some(Slot::Missed(count)) = self.items.back_mut() {
            *count = count.saturating_add(1);
        } else {
            self.items.push_back(Slot::Missed(1));
        }
    }
}

/// The receiving end of one subscriber: the events in order, a [`Missed`] where its queue
/// overflowed. Read them with [`recv`](Self::recv), [`try_recv`](Self::try_recv) or
/// [`poll_recv`](Self::poll_recv).
pub struct Subscription<T> {
    queue: Arc<Queue<T>>,
}

impl<T> std::fmt::Debug for Subscription<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.queue.lock();
        f.debug_struct("Subscription")
            .field("queued", &state.items.len())
            .field("closed", &state.closed)
            .finish()
    }
}

impl<T: From<Missed>> Subscription<T> {
    /// The next event; `None` once the sender is gone and every event was read.
    pub async fn recv(&mut self) -> Option<T> {
        std::future::poll_fn(|cx| self.poll_recv(cx)).await
    }

    /// The next event if one is waiting.
    pub fn try_recv(&mut self) -> Option<T> {
        self.queue.lock().pop()
    }

    /// Polls for the next event; `Ready(None)` once the sender is gone and every event was
    /// read.
    pub fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let mut state = self.queue.lock();
        if let Some(event) = state.pop() {
            return Poll::Ready(Some(event));
        }
        if state.closed {
            return Poll::Ready(None);
        }
        state.waker = Some(cx.waker().clone());
        Poll::Pending
    }

    /// Polls through a pinned reference (for `Stream` implementations).
    pub fn poll_recv_pinned(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        self.get_mut().poll_recv(cx)
    }
}

impl<T: From<Missed>> State<T> {
    fn pop(&mut self) -> Option<T> {
        let slot = self.items.pop_front()?;
        if matches!(slot, Slot::Event(_)) {
            self.events -= 1;
        }
        Some(slot.into_event())
    }
}

impl<T: From<Missed>> Slot<T> {
    fn into_event(self) -> T {
        match self {
            Slot::Event(event) => event,
            Slot::Missed(count) => T::from(Missed { count }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, PartialEq)]
    enum Note {
        N(u32),
        Missed(u64),
    }

    impl From<Missed> for Note {
        fn from(missed: Missed) -> Self {
            Note::Missed(missed.count)
        }
    }

    /// A subscriber that reads only after a burst of 10,000 events has every one, in order;
    /// one that reads slowly while they come, too.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_slow_subscriber_misses_nothing_of_a_burst_of_10000() {
        let fanout = Arc::new(Fanout::new(DEFAULT_CAPACITY));
        let mut late = fanout.subscribe();
        let mut slow = fanout.subscribe();
        let reader = tokio::spawn(async move {
            let mut seen = Vec::new();
            while let Some(note) = slow.recv().await {
                seen.push(note);
                if seen.len() % 100 == 0 {
                    tokio::task::yield_now().await;
                }
            }
            seen
        });
        let sender = Arc::clone(&fanout);
        tokio::spawn(async move {
            for n in 0..10_000 {
                sender.emit(Note::N(n));
            }
        })
        .await
        .ok();
        drop(fanout);
        let expected: Vec<Note> = (0..10_000).map(Note::N).collect();
        let mut read = Vec::new();
        while let Some(note) = late.recv().await {
            read.push(note);
        }
        assert_eq!(read, expected);
        assert_eq!(reader.await.ok(), Some(expected));
    }

    #[test]
    fn an_overflow_is_one_missed_in_place_then_events_again() {
        let fanout = Fanout::new(3);
        let mut events = fanout.subscribe();
        for n in 0..10 {
            fanout.emit(Note::N(n));
        }
        assert_eq!(events.try_recv(), Some(Note::N(0)));
        // Room again: the next event queues after the count.
        fanout.emit(Note::N(10));
        let rest: Vec<Note> = std::iter::from_fn(|| events.try_recv()).collect();
        assert_eq!(rest, [Note::N(1), Note::N(2), Note::Missed(7), Note::N(10)]);
    }

    #[test]
    fn forwards_see_everything_and_dropped_subscribers_are_forgotten() {
        let fanout = Fanout::new(1);
        let seen = Arc::new(Mutex::new(Vec::new()));
        let into = Arc::clone(&seen);
        fanout.forward(Arc::new(move |note: &Note| {
            into.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(note.clone());
        }));
        let gone = fanout.subscribe();
        drop(gone);
        for n in 0..5 {
            fanout.emit(Note::N(n));
        }
        assert_eq!(fanout.lock().queues.len(), 0);
        let seen = seen.lock().unwrap_or_else(PoisonError::into_inner).clone();
        assert_eq!(seen, (0..5).map(Note::N).collect::<Vec<_>>());
    }
}

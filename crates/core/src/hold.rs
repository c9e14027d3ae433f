//! Holding a congesting publisher's input back without deadlocking it.
//!
//! While a subscriber of a session's messages is full, the session's connection must stop
//! handling what the client publishes ([`crate::Session::is_congesting`]). It must not stop
//! handling everything: a client subscribed to what it publishes is its own slow subscriber,
//! and only its acknowledgements of its deliveries can free it. So the connection keeps
//! decoding for a while: publishes (and everything after the first frame held, to keep order)
//! wait in a bounded [`Held`] queue, acknowledgements are handled at once, and once the queue
//! is full the connection stops decoding and reading, and TCP slows the client down.

use std::collections::VecDeque;

/// Most frames held for one connection.
pub const MAX_HELD_FRAMES: usize = 64;
/// Most bytes of held frames (as [`HeldInput::size_of`] counts them) for one connection.
pub const MAX_HELD_BYTES: usize = 64 * 1024;

/// Frames decoded while held back, in arrival order.
#[derive(Debug)]
pub struct Held<T> {
    frames: VecDeque<T>,
    bytes: usize,
}

impl<T> Default for Held<T> {
    fn default() -> Self {
        Held { frames: VecDeque::new(), bytes: 0 }
    }
}

impl<T> Held<T> {
    /// Whether the connection should stop decoding and reading.
    pub fn is_full(&self) -> bool {
        self.frames.len() >= MAX_HELD_FRAMES || self.bytes >= MAX_HELD_BYTES
    }
}

/// One connection's decoded input, as [`handle_input`] drives it.
pub trait HeldInput {
    /// A decoded frame or packet.
    type Frame;
    /// Why the connection ends.
    type Error;

    /// [`crate::Session::is_congesting`] of the connection's session.
    fn is_congesting(&self) -> bool;
    /// The next complete frame from what has been read, if any.
    fn decode(&mut self) -> Result<Option<Self::Frame>, Self::Error>;
    /// Acts on a frame.
    fn handle(&mut self, frame: Self::Frame) -> Result<(), Self::Error>;
    /// Whether `frame` is handled even while others are held: acknowledgements of this
    /// client's deliveries, pings. Anything that publishes or changes subscriptions waits.
    fn passes_hold(frame: &Self::Frame) -> bool;
    /// What holding `frame` costs, in bytes (its payload, roughly).
    fn size_of(frame: &Self::Frame) -> usize;
}

/// Decodes and handles everything read, holding frames back while the session congests; see
/// the module documentation. `held` is `None` while nothing is held, so that an idle
/// connection carries no queue.
pub fn handle_input<I: HeldInput>(input: &mut I, held: &mut Option<Box<Held<I::Frame>>>) -> Result<(), I::Error> {
    loop {
        if let Some(queue) = held.as_mut() {
            while !input.is_congesting()
                && let Some(frame) = queue.frames.pop_front()
            {
                queue.bytes -= I::size_of(&frame);
                input.handle(frame)?;
            }
            if queue.frames.is_empty() {
                *held = None;
            }
        }
        let holding = held.is_some() || input.is_congesting();
        if holding && held.as_ref().is_some_and(|q| q.is_full()) {
            return Ok(());
        }
        let Some(frame) = input.decode()? else { return Ok(()) };
        if holding && !I::passes_hold(&frame) {
            let queue = held.get_or_insert_default();
            queue.bytes += I::size_of(&frame);
            queue.frames.push_back(frame);
        } else {
            input.handle(frame)?;
        }
    }
}

/// Whether a connection with this `held` queue may read more.
pub fn may_read<T>(held: &Option<Box<Held<T>>>) -> bool {
    !held.as_ref().is_some_and(|q| q.is_full())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scripted connection: frames are (is_ack, size); handling a frame records it, and the
    /// session congests while `congested` says so.
    struct Script {
        input: VecDeque<(bool, usize, u32)>,
        handled: Vec<u32>,
        congested: bool,
    }

    impl HeldInput for Script {
        type Frame = (bool, usize, u32);
        type Error = ();

        fn is_congesting(&self) -> bool {
            self.congested
        }
        fn decode(&mut self) -> Result<Option<Self::Frame>, ()> {
            Ok(self.input.pop_front())
        }
        fn handle(&mut self, frame: Self::Frame) -> Result<(), ()> {
            self.handled.push(frame.2);
            Ok(())
        }
        fn passes_hold(frame: &Self::Frame) -> bool {
            frame.0
        }
        fn size_of(frame: &Self::Frame) -> usize {
            frame.1
        }
    }

    fn script(frames: &[(bool, usize, u32)], congested: bool) -> Script {
        Script { input: frames.iter().copied().collect(), handled: Vec::new(), congested }
    }

    #[test]
    fn without_congestion_everything_is_handled_in_order() {
        let mut s = script(&[(false, 10, 1), (true, 0, 2), (false, 10, 3)], false);
        let mut held = None;
        handle_input(&mut s, &mut held).unwrap();
        assert_eq!(s.handled, [1, 2, 3]);
        assert!(held.is_none());
    }

    #[test]
    fn while_congested_acks_pass_and_the_rest_waits_in_order() {
        let mut s = script(&[(false, 10, 1), (true, 0, 2), (false, 10, 3), (true, 0, 4)], true);
        let mut held = None;
        handle_input(&mut s, &mut held).unwrap();
        assert_eq!(s.handled, [2, 4], "only the acknowledgements");
        assert!(may_read(&held));
        s.congested = false;
        handle_input(&mut s, &mut held).unwrap();
        assert_eq!(s.handled, [2, 4, 1, 3], "then the held frames, in order");
        assert!(held.is_none(), "an empty queue is released");
    }

    #[test]
    fn a_full_queue_stops_decoding_by_count_and_by_bytes() {
        let frames: Vec<_> = (0..MAX_HELD_FRAMES as u32 + 5).map(|n| (false, 1, n)).collect();
        let mut s = script(&frames, true);
        let mut held = None;
        handle_input(&mut s, &mut held).unwrap();
        assert!(!may_read(&held));
        assert_eq!(s.input.len(), 5, "decoding stopped at the limit");

        let mut s = script(&[(false, MAX_HELD_BYTES, 1), (true, 0, 2)], true);
        let mut held = None;
        handle_input(&mut s, &mut held).unwrap();
        assert!(!may_read(&held));
        assert!(s.handled.is_empty() && s.input.len() == 1, "not even an ack is decoded past a full queue");
    }
}

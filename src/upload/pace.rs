//! The adaptive request rate: a governor limiter whose rate follows what the service says.
//!
//! The service does not publish its limit (spec §8), so the rate starts at the configured
//! ceiling (or where the last run settled) and adapts, additive increase and multiplicative
//! decrease:
//!
//! - a 429 that says no tokens remain (or says nothing) cuts the rate to [`CUT`] of itself;
//! - a 429 whose `X-RateLimit-Remaining` is above 0 is not about our rate (a passing throttle)
//!   and only holds the rate where it is for a while;
//! - when answers carry `X-RateLimit-Remaining`, a bucket nearly empty ([`LOW`] of the limit)
//!   and not refilling trims the rate a little ([`TRIM`]) before any 429, and one below half
//!   holds it;
//! - a decrease needs a request sent after the last one (answers to requests sent at the old
//!   rate are echoes of the same overload); a trim also needs [`GAP`] since the last decrease,
//!   the time a bucket takes to show that it refills;
//! - after a second of answers with none of the above, the rate rises by a step of 8% of the
//!   rate at the last decrease (additive between decreases), never above the ceiling; before
//!   the first decrease of a run it grows by a quarter per second, so that a run starting from
//!   a low remembered rate finds the service's pace again within seconds.
//!
//! [`RateControl`] is the arithmetic, on explicit instants so that it is tested without
//! sleeping; [`Pace`] wraps it around the limiter the requests wait on.

use crate::api::RateLimit;
use governor::clock::DefaultClock;
use governor::state::{InMemoryState, NotKeyed};
use governor::{Quota, RateLimiter};
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// The rate after a 429, as a share of the rate before.
pub const CUT: f64 = 0.8;
/// The rate after a nearly empty bucket, as a share of the rate before.
pub const TRIM: f64 = 0.9;
/// A bucket with at most this share of its limit left is nearly empty.
pub const LOW: f64 = 0.2;
/// Never slower than this, requests per second.
pub const FLOOR: f64 = 0.2;
/// How long a round of increase lasts.
const ROUND: Duration = Duration::from_secs(1);
/// The least time between a decrease and a trim.
pub const GAP: Duration = Duration::from_millis(250);
/// The increase per round, as a share of the rate at the last decrease.
const STEP: f64 = 0.08;
/// The increase per round before the first decrease, as a factor.
const SLOW_START: f64 = 1.25;
/// The least increase per round, requests per second.
const MIN_STEP: f64 = 0.5;

/// The rate arithmetic (see the module docs).
#[derive(Debug, Clone)]
pub struct RateControl {
    ceiling: f64,
    rate: f64,
    step: f64,
    last_cut: Option<Instant>,
    /// The bucket's fill that caused the last trim (None after a 429 cut).
    fill_at_cut: Option<f64>,
    /// The rate the service last pushed back at (just before the last decrease).
    pushed_back_at: Option<f64>,
    round_start: Instant,
    /// Answers in this round that allow an increase.
    round_ok: u32,
    /// Something in this round said "not faster".
    round_hold: bool,
}

impl RateControl {
    /// Starts at `start` (the last run's settled rate) or at the ceiling.
    pub fn new(ceiling: f64, start: Option<f64>, now: Instant) -> RateControl {
        let ceiling = ceiling.max(FLOOR);
        let rate = start
            .filter(|r| r.is_finite() && *r > 0.0)
            .map_or(ceiling, |r| r.clamp(FLOOR, ceiling));
        RateControl {
            ceiling,
            rate,
            step: (rate * STEP).max(MIN_STEP),
            last_cut: None,
            fill_at_cut: None,
            pushed_back_at: None,
            round_start: now,
            round_ok: 0,
            round_hold: false,
        }
    }

    pub fn rate(&self) -> f64 {
        self.rate
    }

    pub fn ceiling(&self) -> f64 {
        self.ceiling
    }

    /// The rate worth remembering and reporting: the current one, but never above the rate the
    /// service last pushed back at (a run may end halfway up a probe).
    pub fn settled(&self) -> f64 {
        self.pushed_back_at.map_or(self.rate, |r| self.rate.min(r))
    }

    /// A request sent at `sent_at` was throttled (429). Returns the new rate when it changed.
    pub fn throttled(
        &mut self,
        sent_at: Instant,
        now: Instant,
        limits: Option<RateLimit>,
    ) -> Option<f64> {
        self.round_hold = true;
        if limits.and_then(|l| l.remaining).is_some_and(|r| r > 0) {
            return None; // tokens remain: not our rate
        }
        self.cut(CUT, sent_at, now, None)
    }

    /// A request sent at `sent_at` was answered (not throttled). `ok`: the service did the
    /// work (a 5xx neither raises nor cuts). Returns the new rate when it changed.
    pub fn answered(
        &mut self,
        sent_at: Instant,
        now: Instant,
        ok: bool,
        limits: Option<RateLimit>,
    ) -> Option<f64> {
        if let Some(fill) = limits.and_then(fill) {
            if fill <= LOW {
                self.round_hold = true;
                let refilling = self.fill_at_cut.is_some_and(|at_cut| fill > at_cut);
                if refilling {
                    return None;
                }
                return self.cut(TRIM, sent_at, now, Some(fill));
            }
            if fill < 0.5 {
                self.round_hold = true;
            }
        }
        if ok {
            self.round_ok += 1;
        }
        self.end_round(now)
    }

    fn cut(
        &mut self,
        share: f64,
        sent_at: Instant,
        now: Instant,
        fill: Option<f64>,
    ) -> Option<f64> {
        if let Some(cut) = self.last_cut {
            let too_soon = fill.is_some() && now.duration_since(cut) < GAP;
            if sent_at <= cut || too_soon {
                return None; // an echo of the overload the last cut answered
            }
        }
        self.last_cut = Some(now);
        self.fill_at_cut = fill;
        self.pushed_back_at = Some(self.rate);
        self.start_round(now);
        let before = self.rate;
        self.rate = (self.rate * share).max(FLOOR);
        self.step = (self.rate * STEP).max(MIN_STEP);
        (self.rate != before).then_some(self.rate)
    }

    fn end_round(&mut self, now: Instant) -> Option<f64> {
        if now.duration_since(self.round_start) < ROUND {
            return None;
        }
        let raise = self.round_ok > 0 && !self.round_hold && self.rate < self.ceiling;
        self.start_round(now);
        if !raise {
            return None;
        }
        // Until the first decrease the rate may be far below what the service allows (a
        // slow last run): it grows by a quarter per round; after one, by the additive step.
        let raised = if self.last_cut.is_none() {
            self.rate * SLOW_START
        } else {
            self.rate + self.step
        };
        self.rate = raised.min(self.ceiling);
        Some(self.rate)
    }

    fn start_round(&mut self, now: Instant) {
        self.round_start = now;
        self.round_ok = 0;
        self.round_hold = false;
    }
}

/// The share of the service's bucket left, when its headers make sense (a limit of
/// `u32::MAX` or more means "no limit").
fn fill(limits: RateLimit) -> Option<f64> {
    let (limit, remaining) = (limits.limit?, limits.remaining?);
    if limit == 0 || limit == u32::MAX {
        return None;
    }
    Some(remaining as f64 / limit as f64)
}

type Limiter = RateLimiter<NotKeyed, InMemoryState, DefaultClock>;

/// The limiter every request waits on, rebuilt when the rate changes.
#[derive(Debug)]
pub struct Pace {
    control: Mutex<RateControl>,
    limiter: Mutex<Arc<Limiter>>,
    burst: NonZeroU32,
}

impl Pace {
    /// `burst`: requests let through at once after a quiet spell.
    pub fn new(ceiling: f64, start: Option<f64>, burst: u32) -> Pace {
        let control = RateControl::new(ceiling, start, Instant::now());
        let burst = NonZeroU32::new(burst).unwrap_or(NonZeroU32::MIN);
        Pace {
            limiter: Mutex::new(Arc::new(limiter(control.rate(), burst))),
            control: Mutex::new(control),
            burst,
        }
    }

    /// Waits for the next request's turn; returns when it may be sent. A turn given by a
    /// limiter replaced during the wait does not count: the request waits again at the new
    /// rate (else every waiter would still go at the old one).
    pub async fn ready(&self) -> Instant {
        loop {
            let limiter = lock(&self.limiter).clone();
            limiter.until_ready().await;
            if Arc::ptr_eq(&limiter, &lock(&self.limiter)) {
                return Instant::now();
            }
        }
    }

    /// Requests per second now.
    pub fn rate(&self) -> f64 {
        lock(&self.control).rate()
    }

    /// See [`RateControl::settled`].
    pub fn settled(&self) -> f64 {
        lock(&self.control).settled()
    }

    pub fn throttled(&self, sent_at: Instant, limits: Option<RateLimit>) {
        let changed = lock(&self.control).throttled(sent_at, Instant::now(), limits);
        if let Some(rate) = changed {
            tracing::debug!(rate = format_args!("{rate:.1}"), "throttled: rate cut");
            self.set(rate);
        }
    }

    pub fn answered(&self, sent_at: Instant, ok: bool, limits: Option<RateLimit>) {
        let changed = lock(&self.control).answered(sent_at, Instant::now(), ok, limits);
        if let Some(rate) = changed {
            tracing::trace!(rate = format_args!("{rate:.1}"), "rate changed");
            self.set(rate);
        }
    }

    /// A new limiter at `rate`. A fresh governor limiter would let its whole burst through at
    /// once; it is spent first, so the next request waits one period of the new rate, as if the
    /// limiter had run at that rate all along.
    fn set(&self, rate: f64) {
        let limiter = limiter(rate, self.burst);
        // Err only when the burst exceeds the capacity, which it is by construction.
        let _ = limiter.check_n(self.burst);
        *lock(&self.limiter) = Arc::new(limiter);
    }
}

fn limiter(rate: f64, burst: NonZeroU32) -> Limiter {
    let period = Duration::from_secs_f64(1.0 / rate.max(FLOOR));
    // A period of zero is the only refusal; the floor keeps it above zero.
    let quota = Quota::with_period(period)
        .unwrap_or_else(|| Quota::per_second(NonZeroU32::MIN))
        .allow_burst(burst);
    RateLimiter::direct(quota)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(limit: u32, remaining: u32) -> Option<RateLimit> {
        Some(RateLimit {
            limit: Some(limit),
            remaining: Some(remaining),
        })
    }

    fn ms(t0: Instant, ms: u64) -> Instant {
        t0 + Duration::from_millis(ms)
    }

    #[test]
    fn starts_at_the_ceiling_or_the_remembered_rate_below_it() {
        let t0 = Instant::now();
        assert_eq!(RateControl::new(50.0, None, t0).rate(), 50.0);
        assert_eq!(RateControl::new(50.0, Some(20.0), t0).rate(), 20.0);
        assert_eq!(RateControl::new(50.0, Some(80.0), t0).rate(), 50.0);
        assert_eq!(RateControl::new(50.0, Some(f64::NAN), t0).rate(), 50.0);
    }

    #[test]
    fn a_429_cuts_once_per_round_of_requests() {
        let t0 = Instant::now();
        let mut c = RateControl::new(100.0, None, t0);
        assert_eq!(c.throttled(ms(t0, 1), ms(t0, 10), None), Some(80.0));
        // Sent before the cut: the same overload, no second cut.
        assert_eq!(c.throttled(ms(t0, 5), ms(t0, 12), limits(10, 0)), None);
        // Sent after it: the cut was not enough.
        assert_eq!(
            c.throttled(ms(t0, 11), ms(t0, 20), limits(10, 0)),
            Some(64.0)
        );
    }

    #[test]
    fn a_429_with_tokens_left_holds_but_does_not_cut() {
        let t0 = Instant::now();
        let mut c = RateControl::new(100.0, Some(60.0), t0);
        assert_eq!(c.throttled(ms(t0, 1), ms(t0, 2), limits(10, 7)), None);
        assert_eq!(c.rate(), 60.0);
        // The round that saw it does not raise.
        assert_eq!(c.answered(ms(t0, 1000), ms(t0, 1001), true, None), None);
        // The next quiet round does (no decrease yet this run: by a quarter).
        assert_eq!(
            c.answered(ms(t0, 2100), ms(t0, 2101), true, None),
            Some(75.0)
        );
    }

    /// One answer per 100 ms for `secs` seconds; the rates it moved to.
    fn quiet_seconds(c: &mut RateControl, t0: Instant, from: u64, secs: u64) -> Vec<f64> {
        let mut rates = vec![];
        for k in 0..secs * 10 {
            let at = ms(t0, from + k * 100);
            rates.extend(c.answered(at, at, true, limits(1000, 900)));
        }
        rates
    }

    #[test]
    fn before_any_decrease_a_low_start_grows_by_a_quarter_per_second() {
        let t0 = Instant::now();
        let mut c = RateControl::new(100.0, Some(10.0), t0);
        let rates = quiet_seconds(&mut c, t0, 100, 3);
        assert_eq!(rates, vec![12.5, 15.625, 19.53125]);
    }

    #[test]
    fn after_a_decrease_the_rate_rises_additively_up_to_the_ceiling() {
        let t0 = Instant::now();
        let mut c = RateControl::new(20.0, None, t0);
        assert_eq!(c.throttled(ms(t0, 1), ms(t0, 2), None), Some(16.0));
        let rates = quiet_seconds(&mut c, t0, 100, 7);
        // Steps of 8% of 16 (1.28 per second), capped at the ceiling.
        let want = [17.28, 18.56, 19.84, 20.0];
        assert_eq!(rates.len(), want.len(), "{rates:?}");
        for (got, want) in rates.iter().zip(want) {
            assert!((got - want).abs() < 1e-9, "{rates:?}");
        }
        assert!(
            quiet_seconds(&mut c, t0, 7100, 2).is_empty(),
            "never above it"
        );
    }

    #[test]
    fn the_settled_rate_is_never_above_where_the_service_pushed_back() {
        let t0 = Instant::now();
        let mut c = RateControl::new(100.0, Some(50.0), t0);
        assert_eq!(c.settled(), 50.0, "nothing pushed back yet");
        assert_eq!(c.throttled(ms(t0, 1), ms(t0, 2), None), Some(40.0));
        assert_eq!(c.settled(), 40.0);
        let rates = quiet_seconds(&mut c, t0, 100, 5);
        assert!(c.rate() > 50.0, "{rates:?}");
        assert_eq!(c.settled(), 50.0);
    }

    #[test]
    fn a_nearly_empty_bucket_trims_before_any_429() {
        let t0 = Instant::now();
        let mut c = RateControl::new(100.0, Some(55.0), t0);
        let trimmed = c
            .answered(ms(t0, 1), ms(t0, 2), true, limits(10, 1))
            .unwrap();
        assert!((trimmed - 49.5).abs() < 1e-9, "{trimmed}");
        // Still as empty, too soon to tell: left alone.
        assert_eq!(
            c.answered(ms(t0, 100), ms(t0, 100), true, limits(10, 1)),
            None
        );
        // Still as empty a gap later: trimmed again.
        let again = c
            .answered(ms(t0, 300), ms(t0, 300), true, limits(10, 1))
            .unwrap();
        assert!((again - 44.55).abs() < 1e-9, "{again}");
        // Low but refilling since: left alone.
        assert_eq!(
            c.answered(ms(t0, 600), ms(t0, 600), true, limits(10, 2)),
            None
        );
        // Half full: held, no raise in that round.
        c.answered(ms(t0, 900), ms(t0, 900), true, limits(10, 4));
        assert_eq!(c.answered(ms(t0, 1400), ms(t0, 1400), true, None), None);
    }

    #[test]
    fn failures_do_not_raise_and_no_limit_headers_are_ignored() {
        let t0 = Instant::now();
        let mut c = RateControl::new(10.0, Some(5.0), t0);
        assert_eq!(c.answered(ms(t0, 1500), ms(t0, 1500), false, None), None);
        let unlimited = limits(u32::MAX, u32::MAX);
        assert_eq!(
            c.answered(ms(t0, 1600), ms(t0, 1600), true, unlimited),
            None
        );
        assert_eq!(
            c.answered(ms(t0, 2700), ms(t0, 2700), true, unlimited),
            Some(6.25)
        );
    }

    #[test]
    fn never_below_the_floor() {
        let t0 = Instant::now();
        let mut c = RateControl::new(1.0, None, t0);
        for k in 0..50 {
            c.throttled(ms(t0, k * 10 + 1), ms(t0, k * 10 + 5), None);
        }
        assert_eq!(c.rate(), FLOOR);
    }
}

//! The outage state of delivery: when every request fails (5xx, timeouts, refused
//! connections), the uploader stops spending attempts per operation and sends one probe at a
//! time, with growing gaps, until the service answers; the first answer ends it.
//!
//! [`Outage`] is the arithmetic on explicit instants, tested without sleeping; the pace
//! (`super::pace::Pace`) asks it before each request and tells it every result.

use std::time::{Duration, Instant, SystemTime};

/// Failures in a row, with nothing answered for [`SILENT`], that make an outage (a request
/// that never answers: one round of requests in flight timed out).
pub const FAILURES: u32 = 4;
/// How long nothing must have been answered before [`FAILURES`] make an outage (a few
/// failures among answers are passing trouble, retried as usual).
pub const SILENT: Duration = Duration::from_secs(2);
/// Failures in a row that make an outage however fast they came (a service answering 500 to
/// everything). Among 23% of requests failing at random, eight in a row come once in eight
/// million requests.
pub const FAILURES_AT_ONCE: u32 = 8;
/// The gap after the first failed probe; each next failure doubles it.
pub const PROBE_FIRST: Duration = Duration::from_secs(1);
/// The longest gap between probes.
pub const PROBE_MAX: Duration = Duration::from_secs(60);

/// What a request must do before it is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// Not in an outage: go at the pace.
    Go,
    /// In an outage, and this request is the probe: go now.
    Probe,
    /// In an outage: the next probe may go at this instant.
    Until(Instant),
    /// In an outage, a probe is in flight: wait for its result.
    ProbeInFlight,
}

/// A change worth saying.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// The outage began; the first probe goes after `probe_in`.
    Began { probe_in: Duration },
    /// It ended, having lasted this long.
    Ended { lasted: Duration },
}

/// Where delivery stands between "answering" and "all failing".
#[derive(Debug, Clone)]
pub struct Outage {
    /// Failures since the last answer.
    failures: u32,
    last_answer: Instant,
    /// When the failures began, on both clocks (None while answers come).
    failing_since: Option<(Instant, SystemTime)>,
    last_error: Option<String>,
    /// While in an outage: the gap before the next probe, when it may go, and whether one is
    /// in flight.
    state: Option<Probing>,
}

#[derive(Debug, Clone, Copy)]
struct Probing {
    gap: Duration,
    next: Instant,
    in_flight: bool,
}

impl Outage {
    pub fn new(now: Instant) -> Outage {
        Outage {
            failures: 0,
            last_answer: now,
            failing_since: None,
            last_error: None,
            state: None,
        }
    }

    pub fn active(&self) -> bool {
        self.state.is_some()
    }

    /// Since when requests have been failing, while they are (wall clock).
    pub fn failing_since(&self) -> Option<SystemTime> {
        self.failing_since.map(|(_, wall)| wall)
    }

    pub fn last_error(&self) -> Option<&str> {
        self.last_error.as_deref()
    }

    /// The gap before the next probe, while in an outage.
    pub fn probe_gap(&self) -> Option<Duration> {
        self.state.map(|p| p.gap)
    }

    /// What a request must do now. [`Gate::Probe`] marks the probe in flight: its result (or
    /// [`Outage::probe_dropped`]) must follow.
    pub fn gate(&mut self, now: Instant) -> Gate {
        let Some(probing) = self.state.as_mut() else {
            return Gate::Go;
        };
        if probing.in_flight {
            return Gate::ProbeInFlight;
        }
        if now < probing.next {
            return Gate::Until(probing.next);
        }
        probing.in_flight = true;
        Gate::Probe
    }

    /// The probe went without a result (its caller gave up on it): the next one may go.
    pub fn probe_dropped(&mut self) {
        if let Some(p) = self.state.as_mut() {
            p.in_flight = false;
        }
    }

    /// The service answered (anything but a passing failure).
    pub fn answered(&mut self, now: Instant) -> Option<Change> {
        let began = self.failing_since.take();
        self.failures = 0;
        self.last_answer = now;
        self.last_error = None;
        self.state.take().map(|_| Change::Ended {
            lasted: began.map_or(Duration::ZERO, |(at, _)| now.duration_since(at)),
        })
    }

    /// A request failed for a passing reason (`probe`: it was the probe).
    pub fn failed(&mut self, now: Instant, error: String, probe: bool) -> Option<Change> {
        self.failures = self.failures.saturating_add(1);
        self.failing_since
            .get_or_insert_with(|| (now, SystemTime::now()));
        self.last_error = Some(error);
        match self.state.as_mut() {
            Some(p) if probe => {
                p.gap = (p.gap * 2).min(PROBE_MAX);
                p.next = now + p.gap;
                p.in_flight = false;
                None
            }
            // A request sent before the outage began: its failure says nothing new.
            Some(_) => None,
            None => {
                let silent = now.duration_since(self.last_answer) >= SILENT;
                let outage =
                    self.failures >= FAILURES_AT_ONCE || (self.failures >= FAILURES && silent);
                if !outage {
                    return None;
                }
                self.state = Some(Probing {
                    gap: PROBE_FIRST,
                    next: now + PROBE_FIRST,
                    in_flight: false,
                });
                Some(Change::Began {
                    probe_in: PROBE_FIRST,
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(t0: Instant, secs: f64) -> Instant {
        t0 + Duration::from_secs_f64(secs)
    }

    #[test]
    fn a_few_failures_among_answers_are_no_outage() {
        let t0 = Instant::now();
        let mut o = Outage::new(t0);
        for k in 0..7 {
            assert_eq!(o.failed(s(t0, k as f64 * 0.1), "500".into(), false), None);
        }
        assert!(!o.active(), "seven failures within a second of an answer");
        assert!(o.failed(s(t0, 0.8), "500".into(), false).is_some(), "eight");
        o.answered(s(t0, 0.9));
        assert_eq!(o.gate(s(t0, 1.0)), Gate::Go);
        o.answered(s(t0, 1.1));
        for k in 0..3 {
            assert_eq!(o.failed(s(t0, 5.0 + k as f64), "500".into(), false), None);
        }
        assert!(!o.active(), "three failures are not enough");
    }

    #[test]
    fn all_failing_probes_one_at_a_time_with_doubling_gaps_up_to_the_cap() {
        let t0 = Instant::now();
        let mut o = Outage::new(t0);
        for k in 0..3 {
            o.failed(s(t0, 10.0), format!("timeout {k}"), false);
        }
        assert_eq!(
            o.failed(s(t0, 10.0), "timeout 3".into(), false),
            Some(Change::Began {
                probe_in: PROBE_FIRST
            })
        );
        assert_eq!(o.last_error(), Some("timeout 3"));
        assert!(o.failing_since().is_some());
        assert_eq!(o.gate(s(t0, 10.5)), Gate::Until(s(t0, 11.0)));
        assert_eq!(o.gate(s(t0, 11.0)), Gate::Probe);
        assert_eq!(o.gate(s(t0, 11.0)), Gate::ProbeInFlight, "one at a time");
        // Failures of requests sent before the outage do not move the gap.
        o.failed(s(t0, 11.5), "late".into(), false);
        let mut at = 12.0;
        let mut gaps = vec![];
        for _ in 0..8 {
            o.failed(s(t0, at), "500".into(), true);
            let gap = o.probe_gap().unwrap();
            gaps.push(gap.as_secs());
            at += gap.as_secs_f64();
            assert_eq!(o.gate(s(t0, at)), Gate::Probe);
        }
        assert_eq!(gaps, vec![2, 4, 8, 16, 32, 60, 60, 60]);
    }

    #[test]
    fn the_first_answer_ends_it_and_a_dropped_probe_lets_the_next_go() {
        let t0 = Instant::now();
        let mut o = Outage::new(t0);
        for _ in 0..4 {
            o.failed(s(t0, 3.0), "refused".into(), false);
        }
        assert!(o.active());
        assert_eq!(o.gate(s(t0, 4.0)), Gate::Probe);
        o.probe_dropped();
        assert_eq!(o.gate(s(t0, 4.0)), Gate::Probe);
        assert_eq!(
            o.answered(s(t0, 4.5)),
            Some(Change::Ended {
                lasted: Duration::from_millis(1500)
            })
        );
        assert_eq!(o.gate(s(t0, 4.5)), Gate::Go);
        assert_eq!(o.failing_since(), None);
        assert_eq!(o.last_error(), None);
    }
}

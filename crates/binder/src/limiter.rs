//! A client-side token bucket for API requests, like client-go's `--kube-api-qps` and
//! `--kube-api-burst`.
//!
//! kube-rs has no rate limiter of its own. This one is written here rather than taken from a
//! crate (`governor`) because it needs to be small, fair (callers are served in arrival
//! order, so a gang's binds stay together) and to run on tokio's clock, so tests with paused
//! time see it too.

use std::sync::Mutex;
use std::time::Duration;
use tokio::time::Instant;

/// A token bucket: `burst` tokens, refilled at `qps` per second. Each [`TokenBucket::acquire`]
/// takes one token, waiting for it if the bucket is empty. Waiters reserve their token when
/// they arrive (the count may go negative), so they are served in arrival order.
#[derive(Debug)]
pub struct TokenBucket {
    qps: f64,
    burst: f64,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    tokens: f64,
    last: Instant,
}

impl TokenBucket {
    /// A bucket that starts full. `qps <= 0` (or not finite) means unlimited.
    pub fn new(qps: f64, burst: u32) -> Self {
        let burst = f64::from(burst.max(1));
        TokenBucket {
            qps,
            burst,
            state: Mutex::new(State {
                tokens: burst,
                last: Instant::now(),
            }),
        }
    }

    /// Whether this bucket limits anything.
    pub fn is_unlimited(&self) -> bool {
        !(self.qps.is_finite() && self.qps > 0.0)
    }

    /// Takes a token, waiting until one is available.
    pub async fn acquire(&self) {
        if let Some(wait) = self.reserve() {
            tokio::time::sleep(wait).await;
        }
    }

    /// Takes a token if one is there now, without waiting or reserving one ahead: `false`
    /// leaves the bucket as it was (except for its refill).
    pub fn try_acquire(&self) -> bool {
        if self.is_unlimited() {
            return true;
        }
        let mut st = self.lock();
        st.refill(self.qps, self.burst);
        if st.tokens >= 1.0 {
            st.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// How long until [`TokenBucket::try_acquire`] can succeed (zero: now).
    pub fn until_available(&self) -> Duration {
        if self.is_unlimited() {
            return Duration::ZERO;
        }
        let mut st = self.lock();
        st.refill(self.qps, self.burst);
        if st.tokens >= 1.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64((1.0 - st.tokens) / self.qps)
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A poisoned lock only means another caller panicked between two float updates; the
        // state is still a usable number of tokens.
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Takes a token now and says how long to wait before using it (`None`: use it now).
    fn reserve(&self) -> Option<Duration> {
        if self.is_unlimited() {
            return None;
        }
        let mut st = self.lock();
        st.refill(self.qps, self.burst);
        st.tokens -= 1.0;
        if st.tokens >= 0.0 {
            None
        } else {
            Some(Duration::from_secs_f64(-st.tokens / self.qps))
        }
    }
}

impl State {
    fn refill(&mut self, qps: f64, burst: f64) {
        let now = Instant::now();
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.last = now;
        self.tokens = (self.tokens + elapsed * qps).min(burst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn burst_is_free_then_qps_paces() {
        let bucket = TokenBucket::new(10.0, 5);
        let start = Instant::now();
        for _ in 0..5 {
            bucket.acquire().await;
        }
        assert_eq!(
            start.elapsed(),
            Duration::ZERO,
            "the burst is served at once"
        );
        for _ in 0..10 {
            bucket.acquire().await;
        }
        let took = start.elapsed().as_secs_f64();
        assert!(
            (0.99..1.01).contains(&took),
            "10 more at 10 qps take 1s, took {took}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn try_acquire_never_borrows_ahead() {
        let bucket = TokenBucket::new(2.0, 1);
        assert!(bucket.try_acquire());
        assert!(!bucket.try_acquire(), "the one token is taken");
        assert_eq!(bucket.until_available(), Duration::from_millis(500));
        tokio::time::advance(Duration::from_millis(500)).await;
        assert!(bucket.try_acquire());
    }

    #[tokio::test(start_paused = true)]
    async fn zero_qps_is_unlimited() {
        let bucket = TokenBucket::new(0.0, 1);
        let start = Instant::now();
        for _ in 0..1000 {
            bucket.acquire().await;
        }
        assert_eq!(start.elapsed(), Duration::ZERO);
    }
}

//! What the wheel's integration tests share.

/// A xorshift generator: reproducible random choices with no crate.
pub struct Xorshift(pub u64);

impl Xorshift {
    /// The next number below `n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

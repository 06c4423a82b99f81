//! HPGMG-FV: a serial, single-rank, bit-exact port of the default configuration of the
//! HPGMG finite-volume benchmark (fv4 operator, GSRB smoother, FMG F-cycle, BiCGStab bottom).

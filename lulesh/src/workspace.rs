//! Buffers that the reference allocates and frees every cycle; here they
//! are sized once and reused.

use crate::domain::Domain;
use crate::geometry::Corners;

/// Per-run scratch storage.
#[derive(Debug, Default)]
pub struct Workspace {
    /// Jacobian determinant of each element from the stress integration.
    pub determ: Vec<f64>,
    /// Per-element corner x forces (threaded mode only).
    pub fx_elem: Vec<Corners>,
    /// Per-element corner y forces (threaded mode only).
    pub fy_elem: Vec<Corners>,
    /// Per-element corner z forces (threaded mode only).
    pub fz_elem: Vec<Corners>,
    /// Relative volumes clamped to the EOS range.
    pub vnewc: Vec<f64>,
    /// Region-ordered results of a parallel region loop (EOS: p, e, q, ss).
    pub region_out: Vec<[f64; 4]>,
}

impl Workspace {
    /// Allocates buffers for `domain`; the corner-force arrays only when
    /// `threaded`.
    pub fn new(domain: &Domain, threaded: bool) -> Self {
        let n = domain.num_elem();
        let corners = if threaded { n } else { 0 };
        let max_region = domain
            .regions
            .reg_elem_list
            .iter()
            .map(Vec::len)
            .max()
            .unwrap_or(0);
        Workspace {
            determ: vec![0.0; n],
            fx_elem: vec![[0.0; 8]; corners],
            fy_elem: vec![[0.0; 8]; corners],
            fz_elem: vec![[0.0; 8]; corners],
            vnewc: vec![0.0; n],
            region_out: vec![[0.0; 4]; if threaded { max_region } else { 0 }],
        }
    }
}

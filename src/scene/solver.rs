//! `[solver]`: which solver a scene runs and that solver's own keys.
//!
//! The table is read in two passes rather than by `#[serde(tag = "name")]`: serde's internally
//! tagged enums buffer the table and cannot refuse unknown keys (`deny_unknown_fields` does not
//! combine with a tag), and their errors lose the key. Here the table is read whole, `name`
//! picks the variant, every other key is checked against the shared keys and the variant's own
//! (a key that belongs to another solver is named with the solvers that take it), and then the
//! shared part and the variant's part are each deserialised from their keys, every error
//! prefixed with the key it came from (`key `solver.history`: …`, which [`super::Scene::parse`]
//! places on the key's line).
//!
//! The keys each solver takes are the fields of its struct ([`fields_of`]), so the structs are
//! the one list of which key belongs where.

use serde::de::{DeserializeOwned, Error as _, MapAccess};
use serde::{Deserialize, Serialize};

/// `a, b or c`.
fn one_of(names: &[&str]) -> String {
    match names.split_last() {
        Some((last, [])) => (*last).to_string(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}

/// A string-valued `[solver]` key as an enum: its scene-file names, and a message naming the
/// value and the allowed ones (`unknown safeguard `x` (expected cut, always or off)`).
macro_rules! choice {
    ($(#[$meta:meta])* $name:ident, $what:literal, { $($(#[$vmeta:meta])* $v:ident = $s:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vmeta])* $v),+
        }

        impl $name {
            /// Every value, in scene-file order.
            pub const ALL: &[$name] = &[$($name::$v),+];

            /// The scene-file name.
            pub fn name(self) -> &'static str {
                match self {
                    $($name::$v => $s),+
                }
            }

            /// Parses a scene-file name (exact, lower case).
            pub fn from_name(s: &str) -> Option<Self> {
                match s {
                    $($s => Some($name::$v),)+
                    _ => None,
                }
            }

            /// `unknown <what> `s` (expected …)`.
            pub fn unknown(s: &str) -> String {
                format!("unknown {} `{s}` (expected {})", $what, one_of(&[$($s),+]))
            }
        }

        impl Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.name())
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                Self::from_name(&s).ok_or_else(|| D::Error::custom(Self::unknown(&s)))
            }
        }
    };
}

choice!(
    /// The solvers a scene may name (`[solver] name`, `--solver`).
    SolverKind, "solver", {
        /// Projected Newton, f64 (the reference).
        Newton = "newton",
        /// JGS2: per-vertex Jacobi with a precomputed subspace correction.
        Jgs2 = "jgs2",
        /// Vertex block descent.
        Vbd = "vbd",
        /// Quasi-Newton (L-BFGS with a projective-dynamics initial Hessian).
        Qn = "qn",
        /// ADMM with hyperelastic or PD proximal steps.
        Admm = "admm",
        /// Domain-decomposed L-BFGS (DOT).
        Dot = "dot",
        /// L-BFGS with the rest Hessian as initial Hessian (DOT with one subdomain).
        LbfgsH = "lbfgs-h",
        /// Multilevel Newton on SMS subspaces.
        Multilevel = "multilevel",
    }
);

impl SolverKind {
    /// The `[solver]` keys of this solver besides the shared ones ([`CommonSolverSpec`]).
    pub fn own_keys(self) -> &'static [&'static str] {
        match self {
            SolverKind::Newton => fields_of::<NewtonSpec>(),
            SolverKind::Jgs2 => fields_of::<Jgs2Spec>(),
            SolverKind::Vbd => fields_of::<VbdSpec>(),
            SolverKind::Qn => fields_of::<QnSpec>(),
            SolverKind::Admm => fields_of::<AdmmSpec>(),
            SolverKind::Dot => fields_of::<DotSpec>(),
            SolverKind::LbfgsH => fields_of::<LbfgsHSpec>(),
            SolverKind::Multilevel => fields_of::<MultilevelSpec>(),
        }
    }

    /// The solvers whose own keys include `key`, in [`SolverKind::ALL`] order.
    pub fn taking(key: &str) -> Vec<SolverKind> {
        Self::ALL
            .iter()
            .copied()
            .filter(|k| k.own_keys().contains(&key))
            .collect()
    }
}

/// `[solver] name` and `--solver`: a named solver, or `auto` — the runner picks one for the
/// scene and backend by a fixed rule ([`crate::runner::auto`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SolverChoice {
    /// This solver.
    Named(SolverKind),
    /// The rule's pick.
    Auto,
}

impl SolverChoice {
    /// Parses a solver name or `auto`, ignoring ASCII case; the error names every value.
    pub fn parse(s: &str) -> Result<Self, String> {
        if s.eq_ignore_ascii_case("auto") {
            return Ok(SolverChoice::Auto);
        }
        SolverKind::from_name(&s.to_ascii_lowercase())
            .map(SolverChoice::Named)
            .ok_or_else(|| {
                let names: Vec<&str> = SolverKind::ALL.iter().map(|k| k.name()).collect();
                format!(
                    "unknown solver `{s}` (expected one of: {}, auto)",
                    names.join(", ")
                )
            })
    }

    /// The keys this choice takes besides the shared ones (none for `auto`).
    fn own_keys(self) -> &'static [&'static str] {
        match self {
            SolverChoice::Named(k) => k.own_keys(),
            SolverChoice::Auto => &[],
        }
    }
}

impl std::fmt::Display for SolverChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        match self {
            SolverChoice::Named(k) => f.write_str(k.name()),
            SolverChoice::Auto => f.write_str("auto"),
        }
    }
}

impl std::fmt::Display for SolverKind {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A named solver ([`SolverChoice::parse`]; `auto` is refused: it picks a solver only where a
/// scene and backend are known).
impl std::str::FromStr for SolverKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match SolverChoice::parse(s)? {
            SolverChoice::Named(k) => Ok(k),
            SolverChoice::Auto => Err("`auto` picks a solver for a scene; name one here".into()),
        }
    }
}

impl std::str::FromStr for SolverChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Self::parse(s)
    }
}

choice!(
    /// `stop`: the stop rule ([`crate::solver::StopRule`]).
    StopKind, "stop rule", {
        /// Characteristic norm of the gradient below `tolerance` (default).
        Cn = "cn",
        /// Largest position change below `dx_tolerance` × the scene's largest extent.
        Dx = "dx",
    }
);

choice!(
    /// JGS2/VBD `variant`: how vertices are swept ([`crate::solver::jgs2::Variant`]).
    SweepVariant, "variant", {
        /// All vertices from the same iterate (JGS2's default).
        Jacobi = "jacobi",
        /// Colour by colour (VBD's default).
        Gs = "gs",
    }
);

choice!(
    /// JGS2/VBD `safeguard` ([`crate::solver::jgs2::Safeguard`]).
    SafeguardKind, "safeguard", {
        /// The plain step while it passes an energy test, the model step after (JGS2's default).
        Cut = "cut",
        /// The quadratic model's step every iteration.
        Always = "always",
        /// The plain iteration (VBD's default).
        Off = "off",
    }
);

choice!(
    /// JGS2 `contact_coupling` ([`crate::solver::jgs2::ContactCoupling`]; f64 CPU backend).
    CouplingKind, "contact coupling", {
        /// The vertices a contacting vertex touches held (default).
        Held = "held",
        /// The JGS2 paper's §7: its perturbation extended to the vertices it touches.
        Extended = "extended",
        /// Held, plus a coarse correction on every body's octants' affine motions.
        Coarse = "coarse",
    }
);

choice!(
    /// `eigen_filter` ([`crate::solver::HessianFilter`]).
    FilterKind, "filter", {
        /// Clamp negative eigenvalues at 0 (default).
        Clamp = "clamp",
        /// Absolute values.
        Abs = "abs",
        /// Chen et al. 2024's trust-region switch (Newton only).
        Adaptive = "adaptive",
    }
);

choice!(
    /// QN/DOT/LBFGS-H/ADMM `mode`: what ends a step's iterations.
    ModeKind, "mode", {
        /// The stop rule, capped by `max_iterations` (default).
        Rule = "rule",
        /// A fixed count, `iterations` (the papers').
        Fixed = "fixed",
    }
);

choice!(
    /// ADMM `prox`: the z-step ([`crate::solver::admm::ProxKind`]).
    ProxChoice, "prox", {
        /// The isotropic prox on singular values (default; every material).
        Hyperelastic = "hyperelastic",
        /// PD projections.
        Pd = "pd",
    }
);

choice!(
    /// ADMM `penalty`: whether the penalty adapts ([`crate::solver::admm::PenaltyParams`]).
    PenaltyChoice, "penalty", {
        /// Residual balancing (default).
        Balance = "balance",
        /// The fixed w² = V k × weight_scale (the paper's).
        Fixed = "fixed",
    }
);

choice!(
    /// ADMM `contact`: the constrained global step ([`crate::solver::admm::ContactVariant`]).
    ContactSolve, "contact solve", {
        /// Uzawa CG on the fixed factor (default).
        Uzawa = "uzawa",
        /// Projected Gauss–Seidel.
        Pgs = "pgs",
    }
);

choice!(
    /// Multilevel `lag_refresh` ([`crate::solver::multilevel::LagRefresh`]).
    LagRefreshKind, "rule", {
        /// The paper's rule (default).
        Adaptive = "adaptive",
        /// Every Newton iteration.
        Iteration = "iteration",
        /// Once per step.
        Step = "step",
    }
);

choice!(
    /// Multilevel `smoother` ([`crate::solver::multilevel::Preconditioner`]).
    SmootherKind, "preconditioner", {
        /// Jacobi (default, the paper's).
        Jacobi = "jacobi",
        /// One JGS2 Jacobi step as a linear map.
        Jgs2 = "jgs2",
    }
);

choice!(
    /// Multilevel `subspace_solve`: how the affine and SMS levels are solved.
    SubspaceSolve, "solve", {
        /// Block-Jacobi PCG (default, the paper's).
        Pcg = "pcg",
        /// Dense Cholesky of the Galerkin matrix.
        Direct = "direct",
    }
);

choice!(
    /// Multilevel `line_search`: where its energies are evaluated with `--backend gpu`.
    LineSearchPlace, "place", {
        /// On the device (default).
        Device = "device",
        /// On the host in f64.
        Host = "host",
    }
);

impl From<SweepVariant> for crate::solver::jgs2::Variant {
    fn from(v: SweepVariant) -> Self {
        match v {
            SweepVariant::Jacobi => Self::Jacobi,
            SweepVariant::Gs => Self::GaussSeidel,
        }
    }
}

impl From<SafeguardKind> for crate::solver::jgs2::Safeguard {
    fn from(s: SafeguardKind) -> Self {
        match s {
            SafeguardKind::Cut => Self::Cut,
            SafeguardKind::Always => Self::Always,
            SafeguardKind::Off => Self::Off,
        }
    }
}

impl From<CouplingKind> for crate::solver::jgs2::ContactCoupling {
    fn from(c: CouplingKind) -> Self {
        match c {
            CouplingKind::Held => Self::Held,
            CouplingKind::Extended => Self::Extended,
            CouplingKind::Coarse => Self::Coarse,
        }
    }
}

impl From<FilterKind> for crate::solver::HessianFilter {
    fn from(f: FilterKind) -> Self {
        match f {
            FilterKind::Clamp => Self::Clamp,
            FilterKind::Abs => Self::Abs,
            FilterKind::Adaptive => Self::Adaptive,
        }
    }
}

fn default_stop() -> StopKind {
    StopKind::Cn
}
fn default_dx() -> f64 {
    1e-3
}

/// `[solver]`: the shared keys and the named solver's own.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SolverSpec {
    /// Keys every solver takes.
    #[serde(flatten)]
    pub common: CommonSolverSpec,
    /// `name` and the named solver's keys.
    #[serde(flatten)]
    pub options: SolverOptions,
}

impl SolverSpec {
    /// The named solver, or `auto`.
    pub fn choice(&self) -> SolverChoice {
        self.options.choice()
    }

    /// The CN rule's default ε: 1e-5, or 1e-7 for a scene with IPC contact.
    pub fn default_tolerance(ipc: bool) -> f64 {
        if ipc {
            1e-7
        } else {
            1e-5
        }
    }
}

/// The `[solver]` keys every solver takes.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CommonSolverSpec {
    /// Stop rule: `cn` (characteristic norm, default) or `dx` (max position change).
    #[serde(default = "default_stop")]
    pub stop: StopKind,
    /// ε of the characteristic-norm rule (default 1e-5; 1e-7 with `[contact] ipc = true`,
    /// where 1e-5 can stop millimetres from a step's minimiser and freezes sliding friction).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tolerance: Option<f64>,
    /// Tolerance of the dx rule, fraction of the scene's largest extent (default 1e-3).
    #[serde(default = "default_dx")]
    pub dx_tolerance: f64,
    /// Iteration cap per step (default: 100 for Newton and multilevel, 1000 for the others).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_iterations: Option<usize>,
}

impl Default for CommonSolverSpec {
    fn default() -> Self {
        CommonSolverSpec {
            stop: default_stop(),
            tolerance: None,
            dx_tolerance: default_dx(),
            max_iterations: None,
        }
    }
}

/// `name` and the named solver's own keys: one variant per [`SolverKind`].
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "name", rename_all = "kebab-case")]
pub enum SolverOptions {
    /// `newton` (default).
    Newton(NewtonSpec),
    /// `jgs2`.
    Jgs2(Jgs2Spec),
    /// `vbd`.
    Vbd(VbdSpec),
    /// `qn`.
    Qn(QnSpec),
    /// `admm`.
    Admm(AdmmSpec),
    /// `dot`.
    Dot(DotSpec),
    /// `lbfgs-h`.
    LbfgsH(LbfgsHSpec),
    /// `multilevel`.
    Multilevel(MultilevelSpec),
    /// `auto`: no keys of its own.
    Auto,
}

impl Default for SolverOptions {
    fn default() -> Self {
        SolverOptions::Newton(NewtonSpec::default())
    }
}

impl SolverOptions {
    /// Which solver, or `auto`.
    pub fn choice(&self) -> SolverChoice {
        SolverChoice::Named(match self {
            SolverOptions::Newton(_) => SolverKind::Newton,
            SolverOptions::Jgs2(_) => SolverKind::Jgs2,
            SolverOptions::Vbd(_) => SolverKind::Vbd,
            SolverOptions::Qn(_) => SolverKind::Qn,
            SolverOptions::Admm(_) => SolverKind::Admm,
            SolverOptions::Dot(_) => SolverKind::Dot,
            SolverOptions::LbfgsH(_) => SolverKind::LbfgsH,
            SolverOptions::Multilevel(_) => SolverKind::Multilevel,
            SolverOptions::Auto => return SolverChoice::Auto,
        })
    }

    /// `kind`'s keys deserialised from `map` (keys already checked to be `kind`'s own).
    fn from_keys(kind: SolverKind, map: Keyed) -> Result<Self, toml::de::Error> {
        let d = serde::de::value::MapAccessDeserializer::new(map);
        Ok(match kind {
            SolverKind::Newton => SolverOptions::Newton(Deserialize::deserialize(d)?),
            SolverKind::Jgs2 => SolverOptions::Jgs2(Deserialize::deserialize(d)?),
            SolverKind::Vbd => SolverOptions::Vbd(Deserialize::deserialize(d)?),
            SolverKind::Qn => SolverOptions::Qn(Deserialize::deserialize(d)?),
            SolverKind::Admm => SolverOptions::Admm(Deserialize::deserialize(d)?),
            SolverKind::Dot => SolverOptions::Dot(Deserialize::deserialize(d)?),
            SolverKind::LbfgsH => SolverOptions::LbfgsH(Deserialize::deserialize(d)?),
            SolverKind::Multilevel => SolverOptions::Multilevel(Deserialize::deserialize(d)?),
        })
    }
}

/// Newton's keys.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct NewtonSpec {
    /// Eigenvalue filter of the element Hessians, `clamp` (default), `abs` or `adaptive`
    /// (Chen et al. 2024's trust-region switch; see `jello::solver::HessianFilter`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eigen_filter: Option<FilterKind>,
}

/// The JGS2 subspace's far-field keys (JGS2, and multilevel with `smoother = "jgs2"`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FarFieldSpec {
    /// Node-fit far field (setting it or `far_order` chooses node fits over the default
    /// H-matrix): a cluster-tree node stands for its vertices when the subspace deviates from
    /// its fit over them by at most this fraction of the vertex's own block (dimensionless,
    /// default 0.02). Smaller: fewer iterations, more memory; 0 keeps every row exact.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub far_tolerance: Option<f64>,
    /// Node-fit far field (chooses node fits, as `far_tolerance`): 1 (default) least-squares
    /// linear in the rest position, 0 the node mean.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub far_order: Option<usize>,
    /// H-matrix far field (the default): cluster bases keep singular values above this
    /// fraction of each cluster's largest (dimensionless, > 0; default 1e-3). Not with
    /// `far_tolerance`/`far_order`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub far_hmatrix_eps: Option<f64>,
}

/// JGS2's keys.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Jgs2Spec {
    /// `jacobi` (default) or `gs`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<SweepVariant>,
    /// How iterations are guarded against steps that raise the energy: `cut` (default),
    /// `always` or `off`. See `jello::solver::jgs2::Safeguard`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub safeguard: Option<SafeguardKind>,
    /// How a vertex in IPC contact sees the vertices it touches on other bodies: `held`
    /// (default), `extended` (the paper's §7) or `coarse` (held, with a coarse correction);
    /// the last two on the f64 CPU backend only, the device keeps them held. See `jello::solver::jgs2::ContactCoupling`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contact_coupling: Option<CouplingKind>,
    /// See [`FarFieldSpec::far_tolerance`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub far_tolerance: Option<f64>,
    /// See [`FarFieldSpec::far_order`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub far_order: Option<usize>,
    /// See [`FarFieldSpec::far_hmatrix_eps`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub far_hmatrix_eps: Option<f64>,
}

/// VBD's keys.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct VbdSpec {
    /// `gs` (default) or `jacobi`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<SweepVariant>,
    /// `off` (default: the paper's plain iteration), `cut` or `always`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub safeguard: Option<SafeguardKind>,
}

/// QN's keys.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct QnSpec {
    /// L-BFGS history m, an integer in 0..=100 (default 5; 0 takes the projective-dynamics
    /// direction every iteration).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<usize>,
    /// `rule` (default: the stop rule, capped by `max_iterations`) or `fixed` (`iterations`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<ModeKind>,
    /// `mode = "fixed"`: iterations per step (default 10, QN's paper's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iterations: Option<usize>,
}

/// ADMM's keys.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct AdmmSpec {
    /// As [`QnSpec::mode`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<ModeKind>,
    /// As [`QnSpec::iterations`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iterations: Option<usize>,
    /// z-step: `hyperelastic` (default; every material) or `pd` (PD projections: arap, and
    /// fixed_corotated or linear with λ = 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prox: Option<ProxChoice>,
    /// Global multiplier on every w_e² (finite, > 0; default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight_scale: Option<f64>,
    /// Anderson acceleration: differences kept (0: off; default 5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anderson: Option<usize>,
    /// Penalty: `balance` (default; residual balancing) or `fixed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub penalty: Option<PenaltyChoice>,
    /// Obstacle contact: `uzawa` (default) or `pgs`; see `jello::solver::admm::contact`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contact: Option<ContactSolve>,
    /// Contact: CG iterations per active-set round (uzawa) or sweeps (pgs), ≥ 1 (default 200).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contact_iterations: Option<usize>,
    /// Contact: inner tolerance as a fraction of d̂ (> 0, default 1e-6).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contact_tolerance: Option<f64>,
    /// Contact, pgs: over-relaxation ω in (0, 2) (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sor: Option<f64>,
    /// Contact: Coulomb friction coefficient μ ≥ 0 against every obstacle (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub friction: Option<f64>,
}

/// DOT's keys.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct DotSpec {
    /// Subdomains s, an integer in 1..=the element count (default: the thread count; 1 is
    /// LBFGS-H).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subdomains: Option<usize>,
    /// As [`QnSpec::history`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<usize>,
    /// As [`QnSpec::mode`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<ModeKind>,
    /// As [`QnSpec::iterations`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iterations: Option<usize>,
    /// `clamp` (default) or `abs` (the Hessian is built once per step: not `adaptive`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eigen_filter: Option<FilterKind>,
}

/// LBFGS-H's keys.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct LbfgsHSpec {
    /// As [`QnSpec::history`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<usize>,
    /// As [`QnSpec::mode`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<ModeKind>,
    /// As [`QnSpec::iterations`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iterations: Option<usize>,
    /// As [`DotSpec::eigen_filter`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eigen_filter: Option<FilterKind>,
}

/// The multilevel solver's keys (`jello::solver::multilevel`).
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct MultilevelSpec {
    /// SMS handles, an integer in 1..=the vertex count (default about one per 500 vertices,
    /// at least min(16, n/4), at most 400).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handles: Option<usize>,
    /// Full-space Jacobi-PCG iterations per Newton iteration, ≥ 1 (default: the SMS
    /// precompute's rule, 20 or 40 — the paper's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub n_cg: Option<usize>,
    /// Jump factor c of the partitioning metric at material interfaces, > 0 (default 0.25).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jump_factor: Option<f64>,
    /// When the lagged elastic Hessian is rebuilt: `adaptive` (default, the paper's),
    /// `iteration` or `step`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lag_refresh: Option<LagRefreshKind>,
    /// The paper's stop rule instead of `stop`: ‖d_s‖∞/(h·bbox diagonal) below this value,
    /// 1/s (the paper's 1e-3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subspace_stop: Option<f64>,
    /// Preconditioner of the full-space PCG, `jacobi` (default) or `jgs2` (builds or loads the
    /// JGS2 subspace as `--solver jgs2` does, with the `far_*` keys).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub smoother: Option<SmootherKind>,
    /// Newton iterations of a step after which the rest run as Newton-PCG, default 10; 0 turns
    /// the rescue off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rescue_after: Option<usize>,
    /// `pcg` (default) or `direct` (dense Cholesky, levels up to 1,200 DOFs; CPU path).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subspace_solve: Option<SubspaceSolve>,
    /// Where the line search's energies are evaluated with `--backend gpu` (`device`,
    /// default; `host`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line_search: Option<LineSearchPlace>,
    /// See [`FarFieldSpec::far_tolerance`] (with `smoother = "jgs2"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub far_tolerance: Option<f64>,
    /// See [`FarFieldSpec::far_order`] (with `smoother = "jgs2"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub far_order: Option<usize>,
    /// See [`FarFieldSpec::far_hmatrix_eps`] (with `smoother = "jgs2"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub far_hmatrix_eps: Option<f64>,
}

impl SolverOptions {
    /// The JGS2 subspace's far-field keys, where this solver takes them.
    pub fn far_field(&self) -> FarFieldSpec {
        match self {
            SolverOptions::Jgs2(s) => FarFieldSpec {
                far_tolerance: s.far_tolerance,
                far_order: s.far_order,
                far_hmatrix_eps: s.far_hmatrix_eps,
            },
            SolverOptions::Multilevel(s) => FarFieldSpec {
                far_tolerance: s.far_tolerance,
                far_order: s.far_order,
                far_hmatrix_eps: s.far_hmatrix_eps,
            },
            _ => FarFieldSpec::default(),
        }
    }
}

/// The field names of a struct deriving `Deserialize` (what it passes to
/// `deserialize_struct`).
fn fields_of<T: DeserializeOwned>() -> &'static [&'static str] {
    struct Probe<'a>(&'a mut &'static [&'static str]);
    impl<'de> serde::Deserializer<'de> for Probe<'_> {
        type Error = serde::de::value::Error;
        fn deserialize_any<V: serde::de::Visitor<'de>>(
            self,
            _: V,
        ) -> Result<V::Value, Self::Error> {
            Err(Self::Error::custom("not a struct"))
        }
        fn deserialize_struct<V: serde::de::Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Self::Error> {
            *self.0 = fields;
            Err(Self::Error::custom("probed"))
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
            option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
            ignored_any
        }
    }
    let mut fields: &'static [&'static str] = &[];
    let _ = T::deserialize(Probe(&mut fields));
    fields
}

/// `[solver]` entries whose value errors say which key they came from.
struct Keyed {
    entries: std::vec::IntoIter<(String, toml::Value)>,
    key: String,
    value: Option<toml::Value>,
}

impl Keyed {
    fn new(entries: Vec<(String, toml::Value)>) -> Self {
        Keyed {
            entries: entries.into_iter(),
            key: String::new(),
            value: None,
        }
    }
}

/// `key `solver.<key>`: <msg>`.
fn keyed(key: &str, msg: impl std::fmt::Display) -> toml::de::Error {
    <toml::de::Error as serde::de::Error>::custom(format!("key `solver.{key}`: {msg}"))
}

impl<'de> MapAccess<'de> for Keyed {
    type Error = toml::de::Error;

    fn next_key_seed<K: serde::de::DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Self::Error> {
        match self.entries.next() {
            Some((key, value)) => {
                self.value = Some(value);
                let k = seed.deserialize(toml::Value::String(key.clone()))?;
                self.key = key;
                Ok(Some(k))
            }
            None => Ok(None),
        }
    }

    fn next_value_seed<V: serde::de::DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> Result<V::Value, Self::Error> {
        let value = self
            .value
            .take()
            .ok_or_else(|| <toml::de::Error as serde::de::Error>::custom("value is missing"))?;
        seed.deserialize(value)
            .map_err(|e| keyed(&self.key, e.message()))
    }
}

impl SolverSpec {
    /// Reads a `[solver]` table (see the module docs). Errors are one line starting with
    /// ``key `solver.<key>`:``.
    fn from_table(table: toml::Table) -> Result<Self, toml::de::Error> {
        let mut common = Vec::new();
        let mut own = Vec::new();
        let mut name = None;
        for (key, value) in table {
            if key == "name" {
                name = Some(value);
            } else if fields_of::<CommonSolverSpec>().contains(&key.as_str()) {
                common.push((key, value));
            } else {
                own.push((key, value));
            }
        }
        let kind = match name {
            None => SolverChoice::Named(SolverKind::Newton),
            Some(toml::Value::String(s)) => {
                SolverChoice::parse(&s).map_err(|msg| keyed("name", msg))?
            }
            Some(other) => {
                return Err(keyed(
                    "name",
                    format!(
                        "expected a solver name (a string), got {}",
                        other.type_str()
                    ),
                ))
            }
        };
        if let Some((key, _)) = own
            .iter()
            .find(|(k, _)| !kind.own_keys().contains(&k.as_str()))
        {
            let takers = SolverKind::taking(key);
            let msg = if takers.is_empty() {
                let mut known: Vec<&str> = fields_of::<CommonSolverSpec>().to_vec();
                known.push("name");
                known.extend_from_slice(kind.own_keys());
                format!(
                    "unknown field `{key}` for solver {kind} (its keys: {})",
                    known.join(", ")
                )
            } else {
                let names: Vec<&str> = takers.iter().map(|k| k.name()).collect();
                format!("applies only to solver {}, not {kind}", names.join(", "))
            };
            return Err(keyed(key, msg));
        }
        let common = CommonSolverSpec::deserialize(serde::de::value::MapAccessDeserializer::new(
            Keyed::new(common),
        ))?;
        let options = match kind {
            SolverChoice::Named(k) => SolverOptions::from_keys(k, Keyed::new(own))?,
            SolverChoice::Auto => SolverOptions::Auto,
        };
        Ok(SolverSpec { common, options })
    }
}

impl<'de> Deserialize<'de> for SolverSpec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let table = toml::Table::deserialize(d)?;
        SolverSpec::from_table(table).map_err(|e| D::Error::custom(e.message()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<SolverSpec, String> {
        let table: toml::Table = toml::from_str(text).map_err(|e| e.to_string())?;
        SolverSpec::from_table(table).map_err(|e| e.message().to_string())
    }

    #[test]
    fn every_solver_has_a_variant_and_its_keys() {
        for &kind in SolverKind::ALL {
            let s = parse(&format!("name = \"{}\"", kind.name())).unwrap();
            assert_eq!(s.choice(), SolverChoice::Named(kind));
            assert!(!kind.own_keys().is_empty(), "{kind}");
            assert_eq!(
                SolverChoice::parse(&kind.name().to_uppercase()),
                Ok(SolverChoice::Named(kind))
            );
        }
        assert_eq!(
            parse("name = \"Auto\"").unwrap().choice(),
            SolverChoice::Auto
        );
        assert_eq!(parse("").unwrap(), SolverSpec::default());
        assert_eq!(
            fields_of::<CommonSolverSpec>(),
            ["stop", "tolerance", "dx_tolerance", "max_iterations"]
        );
    }

    #[test]
    fn a_key_of_another_solver_is_named_with_its_solvers() {
        let e = parse("name = \"newton\"\nvariant = \"gs\"").unwrap_err();
        assert_eq!(
            e,
            "key `solver.variant`: applies only to solver jgs2, vbd, not newton"
        );
        let e = parse("name = \"qn\"\nsubdomains = 2").unwrap_err();
        assert_eq!(
            e,
            "key `solver.subdomains`: applies only to solver dot, not qn"
        );
        let e = parse("name = \"vbd\"\nbogus = 1").unwrap_err();
        assert!(
            e.starts_with("key `solver.bogus`: unknown field `bogus` for solver vbd")
                && e.contains("variant, safeguard"),
            "{e}"
        );
    }

    #[test]
    fn bad_values_name_the_key_and_the_allowed_values() {
        for (text, want) in [
            (
                "stop = \"dy\"",
                "key `solver.stop`: unknown stop rule `dy` (expected cn or dx)",
            ),
            (
                "name = \"jgs2\"\nvariant = \"rb\"",
                "key `solver.variant`: unknown variant `rb` (expected jacobi or gs)",
            ),
            (
                "name = \"vbd\"\nsafeguard = \"no\"",
                "key `solver.safeguard`: unknown safeguard `no` (expected cut, always or off)",
            ),
            (
                "name = \"admm\"\nprox = \"x\"",
                "key `solver.prox`: unknown prox `x` (expected hyperelastic or pd)",
            ),
            (
                "name = \"dot\"\nmode = \"m\"",
                "key `solver.mode`: unknown mode `m` (expected rule or fixed)",
            ),
            (
                "name = \"fast\"",
                "key `solver.name`: unknown solver `fast` (expected one of: newton, jgs2, vbd, \
                 qn, admm, dot, lbfgs-h, multilevel, auto)",
            ),
            (
                "name = \"auto\"\nhistory = 3",
                "key `solver.history`: applies only to solver qn, dot, lbfgs-h, not auto",
            ),
        ] {
            assert_eq!(parse(text).unwrap_err(), want, "{text}");
        }
        let e = parse("name = \"qn\"\nhistory = -1").unwrap_err();
        assert!(
            e.starts_with("key `solver.history`: ") && e.contains("-1"),
            "{e}"
        );
    }

    #[test]
    fn round_trips_through_serialize() {
        let s = parse(
            "name = \"multilevel\"\nstop = \"dx\"\nhandles = 8\nsmoother = \"jgs2\"\n\
             far_order = 0",
        )
        .unwrap();
        let text = toml::to_string(&s).unwrap();
        assert_eq!(parse(&text).unwrap(), s, "{text}");
        let auto = parse("name = \"auto\"\ntolerance = 1e-6").unwrap();
        let text = toml::to_string(&auto).unwrap();
        assert_eq!(parse(&text).unwrap(), auto, "{text}");
    }
}

//! Binding an op of the trace to a package: does the package cover it (dtypes, devices,
//! constraints), and with which parameters and grids are its kernels launched, with how much
//! scratch. Pure functions of the view, so the claim, compile and tests all compute the same
//! thing.

use crate::expr::{eval, Expr, Value};
use crate::package::{Kernel, Metadata, Package, ParamType};
use std::collections::HashMap;
use thunder_abi::{ArgView, DeviceKind, OpView, TraceView, ValueMeta};

/// A kernel parameter with its value fixed at compile time, except tensors, whose addresses
/// are known only at run time: those are positions in the region's inputs or outputs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Param {
    Input(usize),
    Output(usize),
    /// One of the package's scratch buffers (an index into [`Plan::scratch`]).
    Scratch(usize),
    I32(i32),
    I64(i64),
    U32(u32),
    U64(u64),
    F32(f32),
    F64(f64),
    /// The scratch pointers Triton appends: null when `bytes` is 0.
    GlobalScratch {
        bytes: u64,
        align: u64,
    },
    ProfileScratch {
        bytes: u64,
        align: u64,
    },
}

/// Everything `run` needs to launch one kernel.
#[derive(Debug, Clone, PartialEq)]
pub struct LaunchPlan {
    pub params: Vec<Param>,
    pub grid: [u32; 3],
    pub block: u32,
    pub shared: u32,
}

impl LaunchPlan {
    pub fn has_work(&self) -> bool {
        self.grid.iter().all(|&g| g > 0)
    }
}

/// A scratch buffer's size for this op, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScratchPlan {
    pub bytes: u64,
}

/// Everything `run` needs for one op: its launches in order, the scratch buffers they share,
/// the device and the alignment every tensor address must have.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub launches: Vec<LaunchPlan>,
    pub scratch: Vec<ScratchPlan>,
    pub device: u32,
    pub pointer_align: u64,
}

/// Names bound to values for expression evaluation.
type Env = HashMap<String, Value>;

/// The op's named arguments and output, as expression values, plus each tensor's value id.
fn bindings(
    pkg: &Package,
    view: &TraceView,
    op: &OpView,
) -> Result<(Env, Vec<(String, u32)>), String> {
    if op.args.len() != pkg.args.len() {
        return Err(format!(
            "{} takes {} arguments here, the package names {}",
            op.symbol,
            op.args.len(),
            pkg.args.len()
        ));
    }
    if op.outputs.len() != pkg.outputs.len() {
        return Err(format!(
            "{} has {} outputs, the package names {}",
            op.symbol,
            op.outputs.len(),
            pkg.outputs.len()
        ));
    }
    let meta = |id: u32| -> Result<&ValueMeta, String> {
        view.values
            .get(id as usize)
            .ok_or_else(|| format!("value {id} is not in the view"))
    };
    let mut env = HashMap::new();
    // In argument order, so that the first mismatch reported is the same on every run.
    let mut ids = Vec::new();
    for (name, arg) in pkg.args.iter().zip(op.args.iter()) {
        let v = match arg {
            ArgView::Value(id) => {
                ids.push((name.clone(), *id));
                Value::Tensor(meta(*id)?.shape.to_vec())
            }
            ArgView::Int(i) => Value::Int(*i),
            ArgView::Float(x) => Value::Float(*x),
            ArgView::Bool(b) => Value::Bool(*b),
            ArgView::Ints(v) => Value::Ints(v.to_vec()),
            ArgView::Str(s) => Value::Str(s.to_string()),
            ArgView::None => Value::None,
            other => return Err(format!("argument `{name}` is {other:?}, not usable here")),
        };
        env.insert(name.clone(), v);
    }
    for (name, &id) in pkg.outputs.iter().zip(op.outputs.iter()) {
        ids.push((name.clone(), id));
        env.insert(name.clone(), Value::Tensor(meta(id)?.shape.to_vec()));
    }
    Ok((env, ids))
}

/// Why `pkg` does not cover `op`, or `Ok` with the CUDA device ordinal its tensors are on.
pub fn covers(pkg: &Package, view: &TraceView, op: &OpView) -> Result<u32, String> {
    if op.symbol.as_str() != pkg.symbol {
        return Err(format!("implements {}, not {}", pkg.symbol, op.symbol));
    }
    let (env, ids) = bindings(pkg, view, op)?;
    let mut device = None;
    for (name, id) in &ids {
        let m = &view.values[*id as usize];
        if m.device.kind != DeviceKind::Cuda {
            return Err(format!("`{name}` is not a CUDA tensor"));
        }
        if *device.get_or_insert(m.device.index) != m.device.index {
            return Err("tensors on more than one device".into());
        }
        match pkg.dtypes.get(name) {
            Some(d) if *d != m.dtype => {
                return Err(format!(
                    "`{name}` is {}, the kernel takes {}",
                    m.dtype.short_name(),
                    d.short_name()
                ))
            }
            // A tensor the manifest gives no dtype is not passed to the kernel (validated at
            // load); any dtype will do.
            _ => {}
        }
    }
    // A tensor argument the package expected where the op has a literal (say, a mask given)
    // is caught by the constraints, which compare against `none`.
    for (text, c) in pkg.constraint_text.iter().zip(&pkg.constraints) {
        match eval(c, &env) {
            Ok(Value::Bool(true)) => {}
            Ok(Value::Bool(false)) => return Err(format!("constraint `{text}` does not hold")),
            Ok(other) => return Err(format!("constraint `{text}` is {other}, not a bool")),
            Err(e) => return Err(format!("constraint `{text}`: {e}")),
        }
    }
    device.ok_or_else(|| "no tensor arguments".into())
}

fn int_param(text: &str, v: &Value) -> Result<i64, String> {
    match v {
        Value::Int(i) => Ok(*i),
        other => Err(format!("`{text}` is {other}, not an integer")),
    }
}

fn float_param(text: &str, v: &Value) -> Result<f64, String> {
    match v {
        Value::Int(i) => Ok(*i as f64),
        Value::Float(x) => Ok(*x),
        other => Err(format!("`{text}` is {other}, not a number")),
    }
}

/// The kernels' parameters (Triton's trailing scratch pointers included), launch grids and
/// scratch sizes for `op`, whose region reads `inputs` and writes `outputs` (value ids, in
/// `run`'s order).
pub fn plan(
    pkg: &Package,
    view: &TraceView,
    op: &OpView,
    inputs: &[u32],
    outputs: &[u32],
) -> Result<Plan, String> {
    let device = covers(pkg, view, op)?;
    let (env, ids) = bindings(pkg, view, op)?;
    let mut scratch = Vec::with_capacity(pkg.scratch.len());
    for s in &pkg.scratch {
        let n = int_param(&s.numel_text, &eval(&s.numel, &env)?)?;
        let bytes = u64::try_from(n)
            .ok()
            .and_then(|n| n.checked_mul(s.dtype.size_bytes() as u64))
            .ok_or_else(|| format!("scratch `{}`: {} = {n} elements", s.name, s.numel_text))?;
        scratch.push(ScratchPlan { bytes });
    }
    let launches = pkg
        .launches
        .iter()
        .map(|k| plan_launch(pkg, k, &env, &ids, inputs, outputs))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Plan {
        launches,
        scratch,
        device,
        pointer_align: pkg.pointer_align,
    })
}

fn plan_launch(
    pkg: &Package,
    k: &Kernel,
    env: &Env,
    ids: &[(String, u32)],
    inputs: &[u32],
    outputs: &[u32],
) -> Result<LaunchPlan, String> {
    let mut params = Vec::with_capacity(k.params.len() + k.meta.trailing_params());
    for ((e, text), ty) in k.params.iter().zip(&k.param_text).zip(&k.signature) {
        let p = match ty {
            ParamType::Ptr(_) => {
                // Validated at load: a pointer parameter is a tensor's or a scratch buffer's
                // bare name.
                let name = match e {
                    Expr::Name(n) => n.as_str(),
                    _ => return Err(format!("`{text}` is not a tensor of this op")),
                };
                if let Some(i) = pkg.scratch.iter().position(|s| s.name == name) {
                    Param::Scratch(i)
                } else {
                    let id = ids
                        .iter()
                        .find(|(n, _)| n == name)
                        .map(|(_, id)| id)
                        .ok_or_else(|| format!("`{text}` is not a tensor of this op"))?;
                    if let Some(i) = inputs.iter().position(|v| v == id) {
                        Param::Input(i)
                    } else if let Some(i) = outputs.iter().position(|v| v == id) {
                        Param::Output(i)
                    } else {
                        return Err(format!(
                            "`{text}` is neither an input nor an output of the region"
                        ));
                    }
                }
            }
            ParamType::I32 => {
                let v = int_param(text, &eval(e, env)?)?;
                Param::I32(i32::try_from(v).map_err(|_| format!("`{text}` = {v} overflows i32"))?)
            }
            ParamType::U32 => {
                let v = int_param(text, &eval(e, env)?)?;
                Param::U32(u32::try_from(v).map_err(|_| format!("`{text}` = {v} overflows u32"))?)
            }
            ParamType::I64 => Param::I64(int_param(text, &eval(e, env)?)?),
            ParamType::U64 => {
                let v = int_param(text, &eval(e, env)?)?;
                Param::U64(u64::try_from(v).map_err(|_| format!("`{text}` = {v} is negative"))?)
            }
            ParamType::F32 => Param::F32(float_param(text, &eval(e, env)?)? as f32),
            ParamType::F64 => Param::F64(float_param(text, &eval(e, env)?)?),
        };
        params.push(p);
    }
    let mut grid = [0u32; 3];
    for (axis, e) in k.grid.iter().enumerate() {
        let g = int_param("grid", &eval(e, env)?)?;
        // CUDA's limits: x < 2^31, y and z < 2^16.
        let max: i64 = if axis == 0 { (1 << 31) - 1 } else { 65535 };
        if !(0..=max).contains(&g) {
            return Err(format!(
                "{}: grid[{axis}] = {g} is outside 0..={max}",
                k.kernel
            ));
        }
        grid[axis] = g as u32;
    }
    params.extend(trailing(&k.meta, grid));
    Ok(LaunchPlan {
        params,
        grid,
        block: k.meta.block(),
        shared: k.meta.shared,
    })
}

/// Triton's trailing parameters, as its launcher passes them (`CudaLauncher.__call__` in
/// `triton/backends/nvidia/driver.py`): global scratch, then profile scratch, each sized
/// `size * grid_x * grid_y * grid_z * num_ctas` and null when the size is 0.
pub fn trailing(meta: &Metadata, grid: [u32; 3]) -> Vec<Param> {
    let programs = u64::from(grid[0]) * u64::from(grid[1]) * u64::from(grid[2]);
    let bytes = |size: u64| size * programs * u64::from(meta.num_ctas);
    let mut out = Vec::new();
    if let Some(s) = meta.global_scratch {
        out.push(Param::GlobalScratch {
            bytes: bytes(s.size),
            align: s.align,
        });
    }
    if let Some(s) = meta.profile_scratch {
        out.push(Param::ProfileScratch {
            bytes: bytes(s.size),
            align: s.align,
        });
    }
    out
}

/// The bytes cuLaunchKernel reads for each parameter: one 8-byte slot per parameter, the
/// value in the slot's first bytes in native byte order (the driver reads as many bytes as the
/// kernel's parameter takes). Pointers take their address from `addrs` (same index; 0 is a
/// null scratch pointer).
pub fn param_slots(params: &[Param], addrs: &[u64]) -> Vec<[u8; 8]> {
    params
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let mut s = [0u8; 8];
            match p {
                Param::I32(v) => s[..4].copy_from_slice(&v.to_ne_bytes()),
                Param::U32(v) => s[..4].copy_from_slice(&v.to_ne_bytes()),
                Param::F32(v) => s[..4].copy_from_slice(&v.to_ne_bytes()),
                Param::I64(v) => s.copy_from_slice(&v.to_ne_bytes()),
                Param::U64(v) => s.copy_from_slice(&v.to_ne_bytes()),
                Param::F64(v) => s.copy_from_slice(&v.to_ne_bytes()),
                Param::Input(_)
                | Param::Output(_)
                | Param::Scratch(_)
                | Param::GlobalScratch { .. }
                | Param::ProfileScratch { .. } => {
                    s.copy_from_slice(&addrs.get(i).copied().unwrap_or(0).to_ne_bytes())
                }
            }
            s
        })
        .collect()
}

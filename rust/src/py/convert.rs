//! `convert`: the core's conversion between Claude Code, Codex and Pi files (`crate::convert`). The
//! GIL is released; the report is a dict (the Python module makes the typed result).

use super::errors::os_err;
use crate::convert::{self as core, Format};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use std::path::PathBuf;

pyo3::import_exception!(sessiontree.errors, ConvertError);
pyo3::import_exception!(sessiontree.errors, UnrecognisedFormatError);
pyo3::import_exception!(sessiontree.errors, OutputPathError);
pyo3::import_exception!(sessiontree.errors, SessionArgumentError);

fn map_err(e: core::ConvertError) -> PyErr {
    match e {
        core::ConvertError::Io(p, io) => os_err(&io, &format!("{}: ", p.display())),
        core::ConvertError::Unrecognised(..) => UnrecognisedFormatError::new_err(e.to_string()),
        core::ConvertError::Output(p, why) => {
            OutputPathError::new_err((libc::EEXIST, why, p.display().to_string()))
        }
        core::ConvertError::Unsupported(_) => ConvertError::new_err(e.to_string()),
    }
}

fn format_arg(s: Option<&str>) -> PyResult<Option<Format>> {
    match s {
        None | Some("auto") => Ok(None),
        Some(x) => Format::parse(x).map(Some).ok_or_else(|| {
            SessionArgumentError::new_err(format!(
                "format must be 'auto', 'claude-code', 'codex' or 'pi', not {x:?}"
            ))
        }),
    }
}

/// The format of `path` from its first lines: "claude-code", "codex" or "pi".
#[pyfunction]
pub fn convert_detect(py: Python<'_>, path: PathBuf) -> PyResult<&'static str> {
    py.detach(|| crate::convert::detect(&path))
        .map(Format::name)
        .map_err(map_err)
}

/// The format of a file's bytes held in memory (`name` names them in errors).
#[pyfunction]
pub fn convert_detect_bytes(py: Python<'_>, data: &[u8], name: PathBuf) -> PyResult<&'static str> {
    py.detach(|| crate::convert::detect_bytes(data, &name))
        .map(Format::name)
        .map_err(map_err)
}

/// Converts `src` (format `source`, "auto": detected) to `target` at `out`; a dict report.
/// `shown`: the path the headers give `out` (to Pi only; default `out`); `store_src`,
/// `store_out`: the source and output folders of a whole store's conversion (a Codex fork's
/// `parentSession` then names its parent's Pi output).
#[pyfunction]
#[pyo3(signature = (src, out, source = None, target = "pi", shown = None, store_src = None, store_out = None))]
#[allow(clippy::too_many_arguments)]
pub fn convert_file<'py>(
    py: Python<'py>,
    src: PathBuf,
    out: PathBuf,
    source: Option<&str>,
    target: &str,
    shown: Option<PathBuf>,
    store_src: Option<PathBuf>,
    store_out: Option<PathBuf>,
) -> PyResult<Bound<'py, PyDict>> {
    let from = format_arg(source)?;
    let to = format_arg(Some(target))?
        .ok_or_else(|| SessionArgumentError::new_err("the target format cannot be 'auto'"))?;
    let rep = py
        .detach(|| match (&shown, to) {
            (Some(sh), Format::Pi) => {
                let store = store_src.as_deref().zip(store_out.as_deref());
                crate::convert::to_pi_shown(&src, from, &out, sh, store)
            }
            _ => crate::convert::convert(&src, from, to, &out),
        })
        .map_err(map_err)?;
    report_dict(py, rep)
}

/// Converts a Claude Code or Codex file's bytes to Pi in memory: `(pi_bytes, report)`. `data` is
/// named `name`; `source`: its format ("auto": detected). The main session only: the report's
/// `files` names every session made; sidechains are not returned.
#[pyfunction]
#[pyo3(signature = (data, name, source = None))]
pub fn convert_bytes<'py>(
    py: Python<'py>,
    data: &[u8],
    name: PathBuf,
    source: Option<&str>,
) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyDict>)> {
    let from = format_arg(source)?;
    let (mut files, rep) = py
        .detach(|| crate::convert::to_pi_bytes(data, &name, from))
        .map_err(map_err)?;
    let main = if files.is_empty() {
        Vec::new()
    } else {
        files.swap_remove(0).1
    };
    drop(files);
    Ok((PyBytes::new(py, &main), report_dict(py, rep)?))
}

/// The sessions one conversion made in memory: `(path, bytes)` each (a path's bytes as they
/// are, not made UTF-8).
type MadeFiles<'py> = Vec<(PathBuf, Bound<'py, PyBytes>)>;

/// `convert_bytes` with every session made.
///
/// `([(path, pi_bytes), ...], report)`: the main session first, then the Claude Code sidechain
/// sessions (named as `to_pi` writes them beside `name`, their headers' `parentSession` naming
/// `name`).
#[pyfunction]
#[pyo3(signature = (data, name, source = None))]
pub fn convert_bytes_all<'py>(
    py: Python<'py>,
    data: &[u8],
    name: PathBuf,
    source: Option<&str>,
) -> PyResult<(MadeFiles<'py>, Bound<'py, PyDict>)> {
    let from = format_arg(source)?;
    let (files, rep) = py
        .detach(|| crate::convert::to_pi_bytes(data, &name, from))
        .map_err(map_err)?;
    let files = files
        .into_iter()
        .map(|(p, b)| (p, PyBytes::new(py, &b)))
        .collect();
    Ok((files, report_dict(py, rep)?))
}

fn report_dict(py: Python<'_>, rep: core::Report) -> PyResult<Bound<'_, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("source_format", rep.from.map(Format::name))?;
    d.set_item("target_format", rep.to.map(Format::name))?;
    d.set_item("lines", rep.lines)?;
    d.set_item("written", rep.written)?;
    d.set_item("messages", rep.messages)?;
    d.set_item("compactions", rep.compactions)?;
    d.set_item("custom", rep.custom)?;
    let files: Vec<String> = rep.files.iter().map(|p| p.display().to_string()).collect();
    d.set_item("files", files)?;
    let problems: Vec<(String, u64, &str, String)> = rep
        .problems
        .into_iter()
        .map(|p| (p.file, p.line, p.kind, p.message))
        .collect();
    d.set_item("problems", problems)?;
    d.set_item("not_carried", rep.not_carried)?;
    Ok(d)
}

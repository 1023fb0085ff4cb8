//! The core's errors as the package's exceptions, so that the binding maps them with `?`.
//! Each class is looked up once per interpreter (PyO3 caches the type object) instead of
//! importing `sessiontree.errors` and naming a class at every error. A `PyErr` made here is
//! lazy: the exception (whose `__init__` is Python code) is built when it is raised, after
//! the method has let go of the index.

use crate::index::{OutOfRange, WalkError};
use crate::store::StoreError;
use pyo3::exceptions::{PyIndexError, PyOSError, PyValueError};
use pyo3::PyErr;

pyo3::import_exception!(sessiontree.errors, SessionError);
pyo3::import_exception!(sessiontree.errors, SessionFileChangedError);
pyo3::import_exception!(sessiontree.errors, SessionCycleError);
pyo3::import_exception!(sessiontree.errors, SessionReadOnlyError);
pyo3::import_exception!(sessiontree.errors, SessionArgumentError);

/// `OSError(errno, strerror)` (Python picks the subclass from errno), or `OSError(message)`.
pub fn os_err(e: &std::io::Error, prefix: &str) -> PyErr {
    match e.raw_os_error() {
        Some(code) => {
            let text = e.to_string();
            let text = text
                .strip_suffix(&format!(" (os error {code})"))
                .unwrap_or(&text)
                .to_string();
            PyOSError::new_err((code, format!("{prefix}{text}")))
        }
        None => PyOSError::new_err(format!("{prefix}{e}")),
    }
}

impl From<StoreError> for PyErr {
    fn from(e: StoreError) -> PyErr {
        match e {
            StoreError::Io(io) => os_err(&io, ""),
            StoreError::BadLine(_) | StoreError::KeyOrder => PyValueError::new_err(e.to_string()),
            StoreError::NoWriter | StoreError::Unwritten(_) => SessionError::new_err(e.to_string()),
            StoreError::Replaced => SessionFileChangedError::new_err(e.to_string()),
            StoreError::ReadOnly => SessionReadOnlyError::new_err(e.to_string()),
            other => SessionFileChangedError::new_err(other.to_string()),
        }
    }
}

impl From<OutOfRange> for PyErr {
    fn from(e: OutOfRange) -> PyErr {
        PyIndexError::new_err(e.to_string())
    }
}

impl From<WalkError> for PyErr {
    fn from(e: WalkError) -> PyErr {
        match e {
            WalkError::Cycle(message, ids) => SessionCycleError::new_err((message, ids)),
            WalkError::TooLarge(_) => SessionError::new_err(e.to_string()),
        }
    }
}

impl From<crate::export::ExportError> for PyErr {
    fn from(e: crate::export::ExportError) -> PyErr {
        match e {
            crate::export::ExportError::Read(e) => e.into(),
            crate::export::ExportError::Write(e) => os_err(&e, ""),
            crate::export::ExportError::Pieces => PyValueError::new_err(
                "heads must name every piece and order only pieces that exist",
            ),
        }
    }
}

impl From<crate::reads::ReadError> for PyErr {
    fn from(e: crate::reads::ReadError) -> PyErr {
        match e {
            crate::reads::ReadError::Range(e) => e.into(),
            crate::reads::ReadError::Store(e) => e.into(),
        }
    }
}

impl From<crate::columns::ColumnError> for PyErr {
    fn from(e: crate::columns::ColumnError) -> PyErr {
        use crate::columns::ColumnError;
        match e {
            ColumnError::Store(e) => e.into(),
            ColumnError::Range(e) => e.into(),
            // a name the core does not make (or one given twice): the caller's argument
            ColumnError::Unknown(_) => SessionArgumentError::new_err(e.to_string()),
            ColumnError::TooLong => SessionError::new_err(e.to_string()),
        }
    }
}

impl From<crate::treejson::FallbackCount> for PyErr {
    fn from(e: crate::treejson::FallbackCount) -> PyErr {
        PyValueError::new_err(e.to_string())
    }
}

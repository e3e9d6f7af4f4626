//! Dropping root once the capture is open: the sockets stay usable, nothing else does.

use std::ffi::CString;
use std::io;

use crate::LiveError;

/// Becomes `user` (its uid, its primary group, no supplementary groups). Call after opening
/// the capture and before reading: open sockets keep working, new ones cannot be made.
pub fn drop_to_user(user: &str) -> Result<(), LiveError> {
    let no_user = || LiveError::NoSuchUser(user.to_string());
    let c_user = CString::new(user).map_err(|_| no_user())?;
    // SAFETY: passwd is plain old data; all zeroes is a valid value.
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer is to a live buffer of the length given; getpwnam_r writes only there.
    let r = unsafe { libc::getpwnam_r(c_user.as_ptr(), &mut pwd, buf.as_mut_ptr(), buf.len(), &mut found) };
    if r != 0 || found.is_null() {
        return Err(no_user());
    }
    let (uid, gid) = (pwd.pw_uid, pwd.pw_gid);
    let failed = |error: io::Error| LiveError::Privileges { user: user.to_string(), error };
    // Groups first, then the group, then the user: after setuid the others are no longer allowed.
    // SAFETY: setgroups reads one gid from a live variable; setgid/setuid take plain integers.
    unsafe {
        if libc::setgroups(1, &gid) != 0 {
            return Err(failed(io::Error::last_os_error()));
        }
        if libc::setgid(gid) != 0 {
            return Err(failed(io::Error::last_os_error()));
        }
        if libc::setuid(uid) != 0 {
            return Err(failed(io::Error::last_os_error()));
        }
    }
    // SAFETY: plain getters and a setuid(0) that must fail.
    let (ruid, euid, back) = unsafe { (libc::getuid(), libc::geteuid(), uid != 0 && libc::setuid(0) == 0) };
    if ruid != uid || euid != uid || back {
        return Err(failed(io::Error::other("the process could still become root")));
    }
    Ok(())
}

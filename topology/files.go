package topology

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Caps on what discovery reads from one file. A file larger than its cap
// is an error naming it, never a silently truncated value.
const (
	// maxValueFile caps a sysfs value file. The longest real ones are CPU
	// lists and masks: a list of every other CPU up to MaxCPU is about
	// 200 KB, a mask of MaxCPU bits 18 KB.
	maxValueFile = 1 << 20
	// maxLineFile caps a line-oriented /proc file read line by line
	// (mounts, status, cgroup, cpuinfo, meminfo): a container host with
	// thousands of mounts has a few MB of /proc/mounts.
	maxLineFile = 16 << 20
	// maxLine caps one line of such a file; the kernel's own lines are
	// at most a page or so (getmntent(3) allows 4 KB).
	maxLine = 64 << 10
	// maxSymlinks bounds the links followed while resolving one path, as
	// Linux's MAXSYMLINKS does; more is reported as a loop.
	maxSymlinks = 40
	// maxQuote caps the part of a value that errors and notes quote.
	maxQuote = 64
)

// errSymlinkLoop reports a path whose symbolic links do not end (ELOOP).
var errSymlinkLoop = errors.New("too many levels of symbolic links")

// errTooLarge reports a file larger than its cap.
var errTooLarge = errors.New("file too large")

// shorten returns at most maxQuote bytes of s, cut on a character
// boundary and followed by "…" when cut, for quoting in errors and notes.
func shorten(s string) string {
	if len(s) <= maxQuote {
		return s
	}
	cut := maxQuote
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// quote returns the short quoted form of a value for errors and notes.
func quote(s string) string { return strconv.Quote(shorten(s)) }

// clean returns the value a sysfs or procfs file holds: the text up to
// the first NUL byte (a C string ends there, and hwloc reads it so; some
// kernels append NULs after the newline, "0-3\n\x00"), without the
// surrounding white space.
func clean(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return strings.TrimSpace(string(b))
}

// missing reports whether err says that a file does not exist, as
// opposed to existing but being unreadable (a directory, a symlink loop,
// a permission error).
func missing(err error) bool { return errors.Is(err, fs.ErrNotExist) }

// fileError names path in an error from the file system, keeping the
// cause (fs.ErrNotExist, errSymlinkLoop, ...) for errors.Is.
func fileError(path string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return fmt.Errorf("%w: %s: %w", ErrTopology, path, err)
}

// resolve returns name with every symbolic link on it followed inside the
// root, as if the root were chrooted: an absolute target starts again at
// the root and ".." stops there, so that a captured tree is never left
// for the host's files. A loop is an error naming name. Resolved entries
// are remembered, so each directory is looked at once.
//
// This machine's own root needs none of it (the kernel resolves links
// the same way) and neither does a file system that cannot report links.
func (r *reader) resolve(name string) (string, error) {
	rl, ok := r.fsys.(fs.ReadLinkFS)
	if !r.inRoot || !ok {
		return name, nil
	}
	if r.links == nil {
		r.links = make(map[string]string)
	}
	todo := strings.Split(name, "/")
	done := make([]string, 0, len(todo))
	p := "" // done joined by "/"
	hops := 0
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(done) > 0 {
				done = done[:len(done)-1]
				p = strings.Join(done, "/")
			}
			continue
		}
		parent := p
		done = append(done, c)
		if p == "" {
			p = c
		} else {
			p += "/" + c
		}
		target, seen := r.links[p]
		if !seen {
			fi, err := rl.Lstat(p)
			if err != nil {
				return "", &fs.PathError{Op: "open", Path: name, Err: unwrapPath(err)}
			}
			if fi.Mode()&fs.ModeSymlink != 0 {
				if target, err = rl.ReadLink(p); err != nil {
					return "", &fs.PathError{Op: "readlink", Path: name, Err: unwrapPath(err)}
				}
				if target == "" {
					return "", &fs.PathError{Op: "readlink", Path: name, Err: fs.ErrNotExist}
				}
			}
			r.links[p] = target
		}
		if target == "" {
			continue // not a link
		}
		if hops++; hops > maxSymlinks {
			return "", &fs.PathError{Op: "open", Path: name, Err: errSymlinkLoop}
		}
		done, p = done[:len(done)-1], parent
		if strings.HasPrefix(target, "/") {
			done, p = done[:0], ""
		}
		todo = append(strings.Split(target, "/"), todo...)
	}
	if p == "" {
		return ".", nil
	}
	return p, nil
}

func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// open opens name inside the root.
func (r *reader) open(name string) (fs.File, error) {
	p, err := r.resolve(name)
	if err != nil {
		return nil, err
	}
	return r.fsys.Open(p)
}

// read returns the value of a file of at most maxValueFile bytes, cut at
// its first NUL. Errors name the file and wrap ErrTopology and the cause.
func (r *reader) read(name string) ([]byte, error) {
	f, err := r.open(name)
	if err != nil {
		return nil, fileError(name, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxValueFile+1))
	if err != nil {
		return nil, fileError(name, err)
	}
	if len(b) > maxValueFile {
		return nil, fmt.Errorf("%w: %s: %w: more than %d bytes, starting %s", ErrTopology, name, errTooLarge, maxValueFile, quote(string(b[:maxQuote+1])))
	}
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return b, nil
}

// optional reads a file that discovery can do without: a missing file is
// (nil, false); one that exists but cannot be read (a directory, a
// symlink loop, too large) is noted and treated as missing, as hwloc
// treats any file it fails to read.
func (r *reader) optional(name string) ([]byte, bool) {
	b, err := r.read(name)
	if err != nil {
		if !missing(err) {
			r.note("%v: ignored", err)
		}
		return nil, false
	}
	return b, true
}

// lines calls each with the lines of a line-oriented /proc file, read a
// line at a time (up to maxLine bytes each, maxLineFile in all, ending at
// the first NUL) until each returns false. Errors name the file.
func (r *reader) lines(name string, each func(line string) bool) error {
	f, err := r.open(name)
	if err != nil {
		return fileError(name, err)
	}
	defer f.Close()
	lim := &io.LimitedReader{R: f, N: maxLineFile + 1}
	sc := bufio.NewScanner(lim)
	sc.Buffer(make([]byte, 0, 4096), maxLine)
	sc.Split(scanLinesToNUL)
	for sc.Scan() {
		if lim.N <= 0 {
			return fmt.Errorf("%w: %s: %w: more than %d bytes", ErrTopology, name, errTooLarge, maxLineFile)
		}
		if !each(sc.Text()) {
			return nil
		}
	}
	switch err := sc.Err(); {
	case errors.Is(err, bufio.ErrTooLong):
		return fmt.Errorf("%w: %s: %w: a line longer than %d bytes", ErrTopology, name, errTooLarge, maxLine)
	case err != nil:
		return fileError(name, err)
	case lim.N <= 0:
		return fmt.Errorf("%w: %s: %w: more than %d bytes", ErrTopology, name, errTooLarge, maxLineFile)
	}
	return nil
}

// scanLinesToNUL is bufio.ScanLines, except that a NUL byte ends the
// input (after the line it cuts short).
func scanLinesToNUL(data []byte, atEOF bool) (int, []byte, error) {
	nl := bytes.IndexByte(data, '\n')
	nul := bytes.IndexByte(data, 0)
	if nul >= 0 && (nl < 0 || nul < nl) {
		return nul + 1, bytes.TrimSuffix(data[:nul], []byte{'\r'}), bufio.ErrFinalToken
	}
	if nl >= 0 {
		return nl + 1, bytes.TrimSuffix(data[:nl], []byte{'\r'}), nil
	}
	if atEOF && len(data) > 0 {
		return len(data), data, nil
	}
	return 0, nil, nil
}

// optionalLines is lines for a file discovery can do without: a missing
// file is false, an unreadable one is noted and false.
func (r *reader) optionalLines(name string, each func(line string) bool) bool {
	err := r.lines(name, each)
	if err != nil {
		if !missing(err) {
			r.note("%v: ignored", err)
		}
		return false
	}
	return true
}

// stat describes a file inside the root.
func (r *reader) stat(name string) (fs.FileInfo, error) {
	p, err := r.resolve(name)
	if err != nil {
		return nil, fileError(name, err)
	}
	fi, err := fs.Stat(r.fsys, p)
	if err != nil {
		return nil, fileError(name, err)
	}
	return fi, nil
}

// present reports whether name exists. Like hwloc's access(2) test, only
// "does not exist" counts as absent: a path that exists but cannot be
// used still counts, and the reads below it fail on their own.
func (r *reader) present(name string) bool {
	_, err := r.stat(name)
	return err == nil || !missing(err)
}

// readDir lists a directory inside the root.
func (r *reader) readDir(name string) ([]fs.DirEntry, error) {
	p, err := r.resolve(name)
	if err != nil {
		return nil, fileError(name, err)
	}
	ents, err := fs.ReadDir(r.fsys, p)
	if err != nil {
		return nil, fileError(name, err)
	}
	return ents, nil
}

// numberedEntries lists the entries of dir named prefix<N>, sorted by N.
func (r *reader) numberedEntries(dir, prefix string) ([]int, error) {
	ents, err := r.readDir(dir)
	if err != nil {
		return nil, err
	}
	var out []int
	for _, e := range ents {
		num, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok || num == "" {
			continue
		}
		n, err := strconv.Atoi(num)
		if err != nil || n < 0 || n >= MaxCPU || strconv.Itoa(n) != num {
			continue // cpufreq, cpuidle, ... or a name we do not know
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// isListFile reports whether a sysfs file holds a list ("0-3,8") rather
// than a mask ("0000010f"): *list files, online, possible, has_*.
func isListFile(p string) bool {
	base := path.Base(p)
	return strings.HasSuffix(base, "list") || base == "online" || base == "possible" ||
		base == "present" || strings.HasPrefix(base, "has_")
}

// cpuSet reads a list or mask file, by its name. found is false when the
// file is missing, unreadable or malformed; problem says what was wrong
// with a file that exists, for the caller's note.
func (r *reader) cpuSet(name string) (s CPUSet, found bool, problem string) {
	b, err := r.read(name)
	if err != nil {
		if missing(err) {
			return CPUSet{}, false, ""
		}
		return CPUSet{}, false, err.Error()
	}
	parse := ParseCPUMask
	if isListFile(name) {
		parse = ParseCPUList
	}
	s, err = parse(b)
	if err != nil {
		return CPUSet{}, false, fmt.Sprintf("%s: %v", name, err)
	}
	return s, true, ""
}

// firstCPUSet reads the first of the given files that gives a set. Those
// before it that exist but cannot be used are noted, with the file used
// instead, or with instead when none can be used.
func (r *reader) firstCPUSet(instead string, names ...string) (CPUSet, bool) {
	var problems []string
	for _, p := range names {
		s, ok, problem := r.cpuSet(p)
		if ok {
			for _, pr := range problems {
				r.note("%s: %s used instead", pr, path.Base(p))
			}
			return s, true
		}
		if problem != "" {
			problems = append(problems, problem)
		}
	}
	for _, pr := range problems {
		r.note("%s: %s", pr, instead)
	}
	return CPUSet{}, false
}

"""What scripts/loc.py and scripts/circles.py read of a Rust file: its lines outside tests."""


def nontest_lines(text):
    """The lines of `text` outside `#[cfg(test)]` items: from such a line to the end of the item
    it marks (brace-matched, or its `;` when it has no body)."""
    lines = text.split('\n')
    out, i = [], 0
    while i < len(lines):
        if lines[i].strip().startswith('#[cfg(test)]'):
            depth, started = 0, False
            i += 1
            while i < len(lines):
                s = lines[i]
                depth += s.count('{') - s.count('}')
                if '{' in s:
                    started = True
                i += 1
                if (started and depth <= 0) or (not started and s.strip().endswith(';')):
                    break
            continue
        out.append(lines[i])
        i += 1
    return out

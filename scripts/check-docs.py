#!/usr/bin/env python3
"""Every public function of the given public headers documents its parameters and its result.

Reads the XML that doxygen writes for docs/Doxyfile.in (GENERATE_XML) and reports each public
function, under one of the given paths (relative to include/, e.g. stash/swap), that lacks an
@param for a named parameter or, returning something, an @return. doxygen 1.9.4's own
WARN_NO_PARAMDOC cannot serve: it flags fully documented functions too.

Usage: check-docs.py XML_DIR PATH...   (exit 1 and one line per finding when any is missing)
"""
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path


def documented_params(member):
    names = set()
    for plist in member.iter('parameterlist'):
        if plist.get('kind') != 'param':
            continue
        for name in plist.iter('parametername'):
            names.add((name.text or '').strip())
    return names


def has_return(member):
    return any(s.get('kind') == 'return' for s in member.iter('simplesect'))


def returns_something(member):
    kind_type = ''.join(member.find('type').itertext()) if member.find('type') is not None else ''
    kind_type = re.sub(r'\[\[[^\]]*\]\]', '', kind_type)
    kind_type = re.sub(r'\b(static|constexpr|inline|friend|virtual|explicit)\b', '', kind_type)
    return kind_type.strip() not in ('', 'void')


def findings(xml_dir, paths):
    seen = set()
    for compound in sorted(Path(xml_dir).glob('*.xml')):
        if compound.name in ('index.xml', 'Doxyfile.xml'):
            continue
        root = ET.parse(compound).getroot()
        if any(c.get('prot') == 'private' for c in root.iter('compounddef')):
            continue  # a private nested class: not public API
        for member in root.iter('memberdef'):
            if member.get('kind') != 'function' or member.get('prot') != 'public':
                continue
            location = member.find('location')
            where = location.get('file', '')
            if not any(where == p or where.startswith(p.rstrip('/') + '/') for p in paths):
                continue
            args = member.findtext('argsstring') or ''
            if '=delete' in args or '=default' in args:
                continue
            key = (where, location.get('line'), member.findtext('name'))
            if key in seen:
                continue
            seen.add(key)
            name = member.findtext('qualifiedname') or member.findtext('name')
            parts = name.split('::')
            constructor = len(parts) > 1 and parts[-1] == re.sub(r'<.*', '', parts[-2])
            documented = documented_params(member)
            missing = [p.findtext('declname') for p in member.findall('param')
                       if p.findtext('declname') and p.findtext('declname') not in documented]
            problems = []
            if missing:
                problems.append('no @param for ' + ', '.join(missing))
            if not constructor and returns_something(member) and not has_return(member):
                problems.append('no @return')
            if problems:
                yield f"{where}:{location.get('line')}: {name}: {'; '.join(problems)}"


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    found = list(findings(sys.argv[1], sys.argv[2:]))
    for line in sorted(found):
        print(line)
    if found:
        print(f'{len(found)} public functions without @param/@return (scripts/check-docs.py)')
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())

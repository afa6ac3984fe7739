import re, subprocess, sys
sys.path.insert(0, "tests")
import test_sass as T
tool = T._cuobjdump()
for obj in sys.argv[1:]:
    text = subprocess.run([tool, "--dump-sass", obj], capture_output=True, text=True, check=True).stdout
    functions = {}
    for chunk in text.split("Function : ")[1:]:
        name, _, body = chunk.partition("\n"); functions[name.strip()] = body
    for kernel in ("bf16 qk192_v128", "bf16 hd128"):
        body = T._kernel(functions, kernel)
        lines = [re.sub(r"^\s*/\*[0-9a-f]+\*/\s+", "", l.split(";")[0]) for l in body.splitlines() if re.match(r"\s+/\*[0-9a-f]{4,}\*/", l)]
        races = []
        for i, line in enumerate(lines):
            m = re.match(r"(?:@!?P\d\s+)?[QH]GMMA\.\S+\s+R\d+,\s+R(\d+),", line)
            if not m: continue
            a = {f"R{int(m.group(1)) + k}" for k in range(4)}
            for later in lines[i + 1:i + 400]:
                if "WARPGROUP.DEPBAR.LE gsb0, 0x0" in later or "EXIT" in later: break
                w = re.match(r"(?:@!?U?P\w+\s+)?(?![QH]GMMA)[A-Z0-9_.]+\s+(R\d+)\b", later)
                if w and w.group(1) in a: races.append(f"{line} ... {later}")
        print(obj, kernel, "candidate writes across branches:", len(races), races[:3])

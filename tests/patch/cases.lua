-- tests/patch/cases.lua: apply_patch cases written for lash, covering what
-- Codex's own apply-patch scenarios cover (codex-rs/apply-patch/tests/
-- fixtures/scenarios in openai/codex: adds, deletes, updates, moves, the
-- refusals, whitespace-padded markers, end-of-file anchors) and more
-- (CRLF and mixed endings, typographic punctuation, a file touched twice).
-- Each case: files before, the patch, and whether it applies. The
-- differential test runs each through lash and through Codex's binary and
-- compares the trees; the spec checks lash alone. A case marked
-- `codex_refuses` is one lash takes on purpose and Codex's parser refuses.
local C = {}
local function case(name, files, patch, ok, extra)
  C[#C + 1] = { name = name, files = files, patch = patch, ok = ok, codex_refuses = extra == "codex_refuses" }
end

case("add a file", {}, "*** Begin Patch\n*** Add File: notes.md\n+# Notes\n+\n+first\n*** End Patch\n", true)
case("add, delete and update in one patch", { ["gone.txt"] = "bye\n", ["keep.txt"] = "one\ntwo\nthree\n" },
  "*** Begin Patch\n*** Add File: deep/er/made.txt\n+made\n*** Delete File: gone.txt\n*** Update File: keep.txt\n@@\n one\n-two\n+TWO\n three\n*** End Patch", true)
case("two chunks in one file", { ["m.txt"] = "a\nb\nc\nd\ne\nf\ng\n" },
  "*** Begin Patch\n*** Update File: m.txt\n@@\n a\n-b\n+B\n c\n@@\n e\n-f\n+F\n g\n*** End Patch", true)
case("move into a new directory", { ["src/old.txt"] = "x\ny\n", ["src/other.txt"] = "o\n" },
  "*** Begin Patch\n*** Update File: src/old.txt\n*** Move to: lib/new/place.txt\n@@\n x\n-y\n+z\n*** End Patch", true)
case("an empty patch is refused", { ["f.txt"] = "f\n" }, "*** Begin Patch\n*** End Patch\n", false)
case("context that is not there is refused", { ["f.txt"] = "alpha\nbeta\n" },
  "*** Begin Patch\n*** Update File: f.txt\n@@\n-gamma\n+delta\n*** End Patch", false)
case("deleting a missing file is refused", { ["f.txt"] = "f\n" },
  "*** Begin Patch\n*** Delete File: nope.txt\n*** End Patch", false)
case("an update with no hunks is refused", { ["f.txt"] = "f\n" },
  "*** Begin Patch\n*** Update File: f.txt\n*** End Patch", false)
case("updating a missing file is refused", { ["f.txt"] = "f\n" },
  "*** Begin Patch\n*** Update File: missing.txt\n@@\n-a\n+b\n*** End Patch", false)
case("a move replaces an existing destination", { ["a/from.txt"] = "v1\n", ["b/to.txt"] = "old\n" },
  "*** Begin Patch\n*** Update File: a/from.txt\n*** Move to: b/to.txt\n@@\n-v1\n+v2\n*** End Patch", true)
case("an add replaces an existing file", { ["dup.txt"] = "before\n" },
  "*** Begin Patch\n*** Add File: dup.txt\n+after\n*** End Patch", true)
case("deleting a directory is refused", { ["d/inner.txt"] = "i\n" },
  "*** Begin Patch\n*** Delete File: d\n*** End Patch", false)
case("a bad hunk header is refused", { ["f.txt"] = "f\n" },
  "*** Begin Patch\n*** Frobnicate File: f.txt\n*** End Patch", false)
case("an update ends the file with a newline", { ["nonl.txt"] = "first\nlast" },
  "*** Begin Patch\n*** Update File: nonl.txt\n@@\n-first\n+FIRST\n*** End Patch", true)
case("a later failure leaves nothing half done", { ["x.txt"] = "x\n" },
  "*** Begin Patch\n*** Add File: created.txt\n+new\n*** Update File: x.txt\n@@\n-not here\n+y\n*** End Patch", false)
case("a chunk that only adds appends", { ["in.txt"] = "l1\nl2\n" },
  "*** Begin Patch\n*** Update File: in.txt\n@@\n+added 1\n+added 2\n*** End Patch", true)
case("a padded hunk header", { ["f.txt"] = "a\nb\n" },
  "*** Begin Patch\n  *** Update File: f.txt  \n@@\n-a\n+A\n*** End Patch", true)
case("padded patch markers", { ["f.txt"] = "a\nb\n" },
  "  *** Begin Patch  \n*** Update File: f.txt\n@@\n-b\n+B\n   *** End Patch   \n", true)
case("unicode text", { ["u.txt"] = "héllo wörld\n日本語\n" },
  "*** Begin Patch\n*** Update File: u.txt\n@@\n-日本語\n+中文 ✓\n*** End Patch", true)
case("delete a file", { ["obsolete.txt"] = "old\n", ["keep.txt"] = "k\n" },
  "*** Begin Patch\n*** Delete File: obsolete.txt\n*** End Patch", true)
case("deletions only", { ["l.txt"] = "1\n2\n3\n4\n" },
  "*** Begin Patch\n*** Update File: l.txt\n@@\n 1\n-2\n-3\n 4\n*** End Patch", true)
case("an end-of-file anchor", { ["t.txt"] = "x\nend\nmid\nend\n" },
  "*** Begin Patch\n*** Update File: t.txt\n@@\n-end\n+END\n*** End of File\n*** End Patch", true)
case("a CRLF file keeps its CRLFs", { ["w.txt"] = "one\r\ntwo\r\nthree\r\n" },
  "*** Begin Patch\n*** Update File: w.txt\n@@\n one\n-two\n+2\n+2b\n three\n*** End Patch", true)
case("mixed endings: untouched lines keep theirs", { ["m.txt"] = "a\r\nb\nc\r\nd\n" },
  "*** Begin Patch\n*** Update File: m.txt\n@@\n-c\n+C\n*** End Patch", true)
case("ASCII context matches typographic punctuation", { ["p.py"] = "x = 1  # fast \u{2013} not \u{201C}slow\u{201D}\n" },
  "*** Begin Patch\n*** Update File: p.py\n@@\n-x = 1  # fast - not \"slow\"\n+x = 2\n*** End Patch", true)
case("context differing in trailing whitespace", { ["s.txt"] = "keep   \nold\t\n" },
  "*** Begin Patch\n*** Update File: s.txt\n@@\n keep\n-old\n+new\n*** End Patch", true)
case("context differing in indentation", { ["i.py"] = "    def f():\n        pass\n" },
  "*** Begin Patch\n*** Update File: i.py\n@@\n def f():\n-pass\n+        return 1\n*** End Patch", true)
case("a heredoc around the patch", { ["h.txt"] = "h\n" },
  "<<'EOF'\n*** Begin Patch\n*** Update File: h.txt\n@@\n-h\n+H\n*** End Patch\nEOF\n", true)
case("the same file updated twice", { ["twice.txt"] = "a\nb\nc\n" },
  "*** Begin Patch\n*** Update File: twice.txt\n@@\n-a\n+A\n*** Update File: twice.txt\n@@\n-c\n+C\n*** End Patch", true)
case("a file added then updated", {},
  "*** Begin Patch\n*** Add File: n.txt\n+one\n+two\n*** Update File: n.txt\n@@\n-two\n+TWO\n*** End Patch", true)
case("@@ jumps past an earlier match", { ["c.py"] = "def a():\n    return 0\n\ndef b():\n    return 0\n" },
  "*** Begin Patch\n*** Update File: c.py\n@@ def b():\n-    return 0\n+    return 1\n*** End Patch", true)
case("two @@ lines narrow it down", { ["k.py"] = "class A:\n  def f():\n    x\nclass B:\n  def f():\n    x\n" },
  "*** Begin Patch\n*** Update File: k.py\n@@ class B:\n@@   def f():\n-    x\n+    y\n*** End Patch", true,
  "codex_refuses")
case("a first chunk without @@", { ["g.py"] = "import os\nprint(1)\n" },
  "*** Begin Patch\n*** Update File: g.py\n import os\n+import sys\n print(1)\n*** End Patch", true)
case("blank lines between chunks", { ["b.txt"] = "1\n2\n3\n4\n5\n" },
  "*** Begin Patch\n*** Update File: b.txt\n@@\n-1\n+one\n\n@@\n-5\n+five\n*** End Patch", true)
case("an empty context line in a chunk", { ["e.txt"] = "a\n\nb\n" },
  "*** Begin Patch\n*** Update File: e.txt\n@@\n a\n\n-b\n+B\n*** End Patch", true)
case("a trailing empty line in the old lines", { ["z.txt"] = "x\ny" },
  "*** Begin Patch\n*** Update File: z.txt\n@@\n x\n-y\n+Y\n \n*** End Patch", true)
case("a missing @@ context line is refused", { ["f.py"] = "def f():\n  pass\n" },
  "*** Begin Patch\n*** Update File: f.py\n@@ def nowhere():\n-  pass\n+  return\n*** End Patch", false)
case("no Begin line", { ["f.txt"] = "f\n" }, "*** Update File: f.txt\n@@\n-f\n+g\n*** End Patch", false)
case("no End line", { ["f.txt"] = "f\n" }, "*** Begin Patch\n*** Update File: f.txt\n@@\n-f\n+g\n", false)
case("an empty added file", {}, "*** Begin Patch\n*** Add File: empty.txt\n*** End Patch", true)
case("a second chunk before the first", { ["o.txt"] = "a\nb\nc\nd\n" },
  "*** Begin Patch\n*** Update File: o.txt\n@@\n-c\n+C\n@@\n-a\n+A\n*** End Patch", false)
case("a moved file updated again under its new name", { ["p/q.txt"] = "1\n2\n" },
  "*** Begin Patch\n*** Update File: p/q.txt\n*** Move to: r/s.txt\n@@\n-1\n+one\n*** Update File: r/s.txt\n@@\n-2\n+two\n*** End Patch", true)
case("a loose context line between changes", { ["l.txt"] = "one\n  two  \nthree\n" },
  "*** Begin Patch\n*** Update File: l.txt\n@@\n-one\n+ONE\n two\n-three\n+THREE\n*** End Patch", true)
case("context lines in a CRLF file", { ["c.txt"] = "a\r\nb\nc\r\n" },
  "*** Begin Patch\n*** Update File: c.txt\n@@\n a\n b\n-c\n+C\n*** End Patch", true)
return C

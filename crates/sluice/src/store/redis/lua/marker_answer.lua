-- marker_answer: what `return from_marker(<value>)` in a one-limit script stands for (see
-- one_head.lua). one_script::one_text writes the lines below in its place, with <value> for `...`:
-- the answer of a block in force, or {} (a block that is over, or anything else).
-- The answer is one value, `<marker> <now> <violations> <warning>` (codec.rs; the
-- marker as held, with the copy of its violations when it has one, see the prelude): a
-- table of nine costs Redis about 5,000 instructions more than the text. The time's 16 digits are
-- written by string.format, which costs less than `..` on a number; a violations count above 0 is
-- the violations key's own text, as one_head.lua read it (held_violations).
do
  local held = ...
  if type(held) == 'string' and string.byte(held, 1) == MARKER_BYTE then
    local until_us = tonumber(string.match(held, MARKER_END)) or 0
    if until_us > now then
      return held .. ' ' .. string.format('%d', now) .. ' '
        .. (violations > 0 and held_violations or '0') .. ' ' .. (warning == 1 and '1' or '0')
    end
  end
  return {}
end

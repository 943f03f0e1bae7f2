-- Wireshark / tshark dissector for hina (homomorphic in-network aggregation).
--
-- The header of DESIGN.md section 2 (p4/headers.p4, switch_emulator/headers.py):
-- 16 bytes in network byte order, then K int32 payload words, `count` of them valid.
-- Registered on UDP port 0x4E41 (20033), both directions.
--
--   tshark -X lua_script:wireshark/hina.lua -r capture.pcap -V
--   wireshark -X lua_script:wireshark/hina.lua capture.pcap     (or copy it to ~/.local/lib/wireshark/plugins/)

local hina = Proto("hina", "hina in-network aggregation")

local msg_types = { [0] = "UPDATE", [1] = "RESULT" }
local ops = { [0] = "ADD", [1] = "OR", [2] = "MAX" }

local f = hina.fields
f.msg_type = ProtoField.uint8("hina.msg_type", "Message type", base.DEC, msg_types)
f.op = ProtoField.uint8("hina.op", "Operation", base.DEC, ops)
f.job_id = ProtoField.uint16("hina.job_id", "Job", base.DEC)
f.worker_id = ProtoField.uint8("hina.worker_id", "Worker", base.DEC)
f.flags = ProtoField.uint8("hina.flags", "Flags", base.HEX)
f.resend = ProtoField.bool("hina.flags.resend", "Unicast re-send of a completed slot", 8, nil, 0x01)
f.pool_index = ProtoField.uint16("hina.pool_index", "Pool index", base.HEX)
f.version = ProtoField.uint16("hina.version", "Slot copy (version)", base.DEC, nil, 0x8000)
f.slot = ProtoField.uint16("hina.slot", "Slot", base.DEC, nil, 0x7FFF)
f.offset = ProtoField.uint32("hina.offset", "Offset (words, plus the run's salt)", base.DEC)
f.count = ProtoField.uint16("hina.count", "Valid words", base.DEC)
f.phase = ProtoField.uint16("hina.phase", "Phase tag", base.DEC)
f.words = ProtoField.bytes("hina.words", "Payload words")
f.word = ProtoField.int32("hina.word", "Word", base.DEC)
f.padding = ProtoField.uint32("hina.padding_words", "Padding words", base.DEC)

local HEADER = 16

function hina.dissector(buffer, pinfo, tree)
    if buffer:len() < HEADER then
        return 0
    end
    pinfo.cols.protocol = "HINA"
    local subtree = tree:add(hina, buffer(), "hina")
    local msg_type = buffer(0, 1):uint()
    local op = buffer(1, 1):uint()
    subtree:add(f.msg_type, buffer(0, 1))
    subtree:add(f.op, buffer(1, 1))
    subtree:add(f.job_id, buffer(2, 2))
    subtree:add(f.worker_id, buffer(4, 1))
    local flags = subtree:add(f.flags, buffer(5, 1))
    flags:add(f.resend, buffer(5, 1))
    local pool = subtree:add(f.pool_index, buffer(6, 2))
    pool:add(f.version, buffer(6, 2))
    pool:add(f.slot, buffer(6, 2))
    subtree:add(f.offset, buffer(8, 4))
    subtree:add(f.count, buffer(12, 2))
    subtree:add(f.phase, buffer(14, 2))
    local count = buffer(12, 2):uint()
    local words = math.floor((buffer:len() - HEADER) / 4)
    if words > 0 then
        local payload = subtree:add(f.words, buffer(HEADER, words * 4))
        for i = 0, math.min(count, words) - 1 do
            payload:add(f.word, buffer(HEADER + 4 * i, 4))
        end
        if words > count then
            payload:add(f.padding, words - count):set_generated()
        end
    end
    pinfo.cols.info = string.format("%s %s job=%d worker=%d slot=%d/v%d offset=%d count=%d phase=%d",
        msg_types[msg_type] or tostring(msg_type), ops[op] or tostring(op), buffer(2, 2):uint(),
        buffer(4, 1):uint(), buffer(6, 2):bitfield(1, 15), buffer(6, 2):bitfield(0, 1), buffer(8, 4):uint(),
        count, buffer(14, 2):uint())
    return buffer:len()
end

DissectorTable.get("udp.port"):add(20033, hina)

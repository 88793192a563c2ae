// Validates an XML file against an XSD with the JDK's own validator (javax.xml.validation):
//   java tests/XsdValidate.java SCHEMA.xsd FILE.xml
// Prints "valid", or the first error with its file and line, and exits 0 or 1. Used by tests/unit/test_junit.py where
// neither lxml nor xmlschema can be imported.
import java.io.File;
import javax.xml.XMLConstants;
import javax.xml.transform.stream.StreamSource;
import javax.xml.validation.SchemaFactory;
import org.xml.sax.SAXParseException;

public class XsdValidate {
    public static void main(String[] args) throws Exception {
        SchemaFactory factory = SchemaFactory.newInstance(XMLConstants.W3C_XML_SCHEMA_NS_URI);
        try {
            factory.newSchema(new File(args[0])).newValidator().validate(new StreamSource(new File(args[1])));
        } catch (SAXParseException e) {
            System.out.println(e.getSystemId() + ":" + e.getLineNumber() + ": " + e.getMessage());
            System.exit(1);
        }
        System.out.println("valid");
    }
}
